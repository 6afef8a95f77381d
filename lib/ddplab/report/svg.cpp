#include "ddplab/report/svg.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include <fmt/format.h>

namespace ddplab::report {

namespace {
const char* const kPalette[] = {"#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"};
const char* const kNeutral = "#777777";
const char* const kLightNeutral = "#BBBBBB";
constexpr size_t kPaletteSize = sizeof(kPalette) / sizeof(kPalette[0]);

std::string num(double v) { return fmt::format("{:.2f}", v); }

std::string tick_text(double v, double step) {
  if (std::fabs(v) < step * 1e-9) v = 0;
  const double a = std::fabs(v);
  if (a != 0 && (a >= 1e5 || a < 1e-3)) return fmt::format("{:.2g}", v);
  if (!(step > 0) || !std::isfinite(step)) return fmt::format("{:g}", v);
  const int decimals = step >= 1 ? 0 : std::min(6, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
  return fmt::format("{:.{}f}", v, decimals);
}
}  // namespace

std::string escape_html(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

LineChart line_chart(std::string id, std::string title, std::string x_label, std::string y_label) {
  LineChart chart;
  chart.id = std::move(id);
  chart.title = std::move(title);
  chart.x_label = std::move(x_label);
  chart.y_label = std::move(y_label);
  return chart;
}

std::string palette_colour(size_t i) { return kPalette[i % kPaletteSize]; }

bool palette_repeats(size_t i) { return i >= kPaletteSize; }

std::string colour_of_index(int i) {
  return i >= 0 ? palette_colour(static_cast<size_t>(i)) : i == kLightNeutralColour ? kLightNeutral : kNeutral;
}

std::vector<double> nice_ticks(double lo, double hi, int target, bool integer) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {};
  if (hi < lo) std::swap(lo, hi);
  // A range at rounding level (the mean of equal values, 0.1 vs 0.10000000000000002) is one value:
  // ticks that far apart would coincide and give a zero step.
  if (hi - lo <= 1e-9 * std::max(std::fabs(lo), std::fabs(hi))) {
    const double pad = lo == 0 ? 1 : std::fabs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  const double raw = (hi - lo) / std::max(1, target);
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  const double frac = raw / mag;
  const double step = std::max(integer ? 1.0 : 0.0, (frac <= 1 ? 1 : frac <= 2 ? 2 : frac <= 5 ? 5 : 10) * mag);
  std::vector<double> ticks;
  for (double t = std::floor(lo / step) * step; t <= hi + step * 0.5 && ticks.size() < 100; t += step)
    ticks.push_back(t);
  // Cover [lo, hi]: the last tick must reach hi.
  if (ticks.empty() || ticks.back() < hi - step * 1e-9) ticks.push_back(ticks.empty() ? hi : ticks.back() + step);
  return ticks;
}

std::vector<double> log_ticks(double lo, double hi) {
  if (!(lo > 0) || !(hi > 0) || !std::isfinite(lo) || !std::isfinite(hi)) return {};
  if (hi < lo) std::swap(lo, hi);
  const int k_lo = static_cast<int>(std::floor(std::log10(lo) + 1e-9));
  const int k_hi = static_cast<int>(std::ceil(std::log10(hi) - 1e-9));
  const bool sparse = k_hi - k_lo > 3;
  std::vector<double> all;
  for (int k = k_lo; k <= k_hi; ++k)
    for (double m : {1.0, 2.0, 5.0})
      if (!sparse || m == 1.0) all.push_back(m * std::pow(10.0, k));
  // From the last tick <= lo to the first tick >= hi.
  size_t first = 0, last = all.size() - 1;
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i] <= lo * (1 + 1e-12)) first = i;
  for (size_t i = all.size(); i-- > 0;)
    if (all[i] >= hi * (1 - 1e-12)) last = i;
  if (last <= first) last = std::min(all.size() - 1, first + 1);
  return std::vector<double>(all.begin() + static_cast<std::ptrdiff_t>(first),
                             all.begin() + static_cast<std::ptrdiff_t>(last) + 1);
}

std::vector<double> log2_ticks(double lo, double hi) {
  if (!(lo > 0) || !(hi > 0) || !std::isfinite(lo) || !std::isfinite(hi)) return {};
  if (hi < lo) std::swap(lo, hi);
  int k_lo = static_cast<int>(std::floor(std::log2(lo) + 1e-9));
  const int k_hi = std::max(k_lo + 1, static_cast<int>(std::ceil(std::log2(hi) - 1e-9)));
  const int stride = k_hi - k_lo > 12 ? 2 : 1;
  std::vector<double> ticks;
  for (int k = k_lo; k < k_hi + stride; k += stride) ticks.push_back(std::ldexp(1.0, k));
  return ticks;
}

namespace {
constexpr double kLeft = 70, kRight = 20, kTop = 40, kBottom = 50, kLegendRow = 20, kLegendLine = 15;
// A generous width of one character at font-size 12 (sans-serif capitals and digits are ~7 px):
// legend text is wrapped so that this many pixels per character fit in the chart.
constexpr double kCharWidth = 7.5;
constexpr double kLegendTextX = kLeft + 30;

// The legend text of a series broken into lines of at most `max_chars`, at ", " or spaces when it
// can be, else mid-word.
std::vector<std::string> wrap_label(const std::string& text, size_t max_chars) {
  std::vector<std::string> lines;
  std::string rest = text;
  while (rest.size() > max_chars) {
    size_t cut = rest.rfind(' ', max_chars);
    if (cut == std::string::npos || cut == 0) cut = max_chars;
    // Never split a UTF-8 sequence.
    while (cut > 0 && cut < rest.size() && (static_cast<unsigned char>(rest[cut]) & 0xC0) == 0x80) --cut;
    lines.push_back(rest.substr(0, cut));
    rest = rest.substr(cut);
    if (!rest.empty() && rest.front() == ' ') rest.erase(0, 1);
  }
  lines.push_back(rest);
  return lines;
}

size_t legend_chars(double width) {
  return static_cast<size_t>(std::max(10.0, (width - kLegendTextX - 10) / kCharWidth));
}

// Where a chart's values land: the axes' ticks and ranges, and the pixel mapping.
struct Frame {
  double w = 0, ph = 0, plot_w = 0;  // chart width, plot height and width
  double legend_y = 0, h = 0;        // the first legend row; the chart's height
  bool log_y = false;
  XScale x_scale = XScale::kLinear;
  std::vector<double> xt, yt;  // ticks
  double xa = 0, xb = 1, ya = 0, yb = 1, x_step = 1, y_step = 1;

  // A y value that can be drawn: finite, and positive on a log axis.
  bool y_ok(double v) const { return std::isfinite(v) && (!log_y || v > 0); }
  bool x_ok(double v) const { return std::isfinite(v) && (x_scale == XScale::kLinear || v > 0); }
  double px(double x) const {
    if (x_scale == XScale::kLinear) return kLeft + (x - xa) / (xb - xa) * plot_w;
    return kLeft + (std::log(x) - std::log(xa)) / (std::log(xb) - std::log(xa)) * plot_w;
  }
  double py(double y) const {
    const double f =
        log_y ? (std::log10(y) - std::log10(ya)) / (std::log10(yb) - std::log10(ya)) : (y - ya) / (yb - ya);
    return kTop + ph - f * ph;
  }
};

Frame frame_of(const LineChart& chart) {
  Frame f;
  f.w = chart.width;
  f.ph = chart.plot_height;
  f.plot_w = f.w - kLeft - kRight;
  f.log_y = chart.log_y;
  f.x_scale = chart.x_scale;
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo, y_lo = x_lo, y_hi = -x_lo;
  auto widen = [](double v, double& lo, double& hi) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  };
  for (const auto& s : chart.series) {
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!f.x_ok(s.x[i]) || i >= s.y.size() || !f.y_ok(s.y[i])) continue;
      widen(s.x[i], x_lo, x_hi);
      widen(s.y[i], y_lo, y_hi);
      // An error bar widens the axis only as far as y can go; past that it ends in an arrow.
      for (const auto* err : {&s.err_lo, &s.err_hi})
        if (i < err->size() && f.y_ok((*err)[i])) widen(std::clamp((*err)[i], chart.y_floor, chart.y_ceil), y_lo, y_hi);
      if (i < s.lo.size() && f.y_ok(s.lo[i])) widen(s.lo[i], y_lo, y_hi);
      if (i < s.hi.size() && f.y_ok(s.hi[i])) widen(s.hi[i], y_lo, y_hi);
    }
  }
  if (!std::isfinite(x_lo))
    x_lo = f.x_scale == XScale::kLinear ? 0 : 1, x_hi = f.x_scale == XScale::kLinear ? 1 : 10, y_lo = f.log_y ? 1 : 0,
    y_hi = f.log_y ? 10 : 1;
  for (const auto& s : chart.series)
    if (f.y_ok(s.reference_y)) widen(s.reference_y, y_lo, y_hi);
  f.xt = f.x_scale == XScale::kLog2    ? log2_ticks(x_lo, x_hi)
         : f.x_scale == XScale::kLog10 ? log_ticks(x_lo, x_hi)
                                       : nice_ticks(x_lo, x_hi, 8, chart.integer_x);
  f.yt = f.log_y ? log_ticks(y_lo, y_hi) : nice_ticks(y_lo, y_hi, 6);
  f.xa = f.xt.front(), f.xb = f.xt.back(), f.ya = f.yt.front(), f.yb = f.yt.back();
  f.x_step = f.xt.size() > 1 ? f.xt[1] - f.xt[0] : 1, f.y_step = f.yt.size() > 1 ? f.yt[1] - f.yt[0] : 1;
  f.legend_y = kTop + f.ph + kBottom;
  double rows = 0;
  for (const auto& s : chart.series)
    rows += kLegendRow + kLegendLine * static_cast<double>(wrap_label(s.label, legend_chars(f.w)).size() - 1);
  f.h = f.legend_y + rows + 10;
  return f;
}

// The <svg> element's opening, background and title.
std::string svg_head(const LineChart& chart, const Frame& f) {
  std::string o = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"chart-{}\" class=\"chart\" width=\"{:g}\" height=\"{}\" "
      "viewBox=\"0 0 {:g} {}\" font-family=\"sans-serif\" font-size=\"12\" role=\"img\" aria-label=\"{}\">\n",
      escape_html(chart.id), f.w, num(f.h), f.w, num(f.h), escape_html(chart.title));
  o += fmt::format("<title>{}</title>\n", escape_html(chart.title));
  o += fmt::format("<rect x=\"0\" y=\"0\" width=\"{:g}\" height=\"{}\" fill=\"#ffffff\"/>\n", f.w, num(f.h));
  o += fmt::format("<text x=\"{}\" y=\"22\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">{}</text>\n",
                   num(f.w / 2), escape_html(chart.title));
  return o;
}

// Grid, frame, tick labels and axis labels.
std::string svg_axes(const LineChart& chart, const Frame& f) {
  std::string o = "<g class=\"axes\" stroke=\"#dddddd\" stroke-width=\"1\">\n";
  for (double t : f.xt)
    o += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>\n", num(f.px(t)), num(kTop), num(f.px(t)),
                     num(kTop + f.ph));
  for (double t : f.yt)
    o += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\"/>\n", num(kLeft), num(f.py(t)),
                     num(kLeft + f.plot_w), num(f.py(t)));
  o += "</g>\n";
  o += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333333\"/>\n",
                   num(kLeft), num(kTop), num(f.plot_w), num(f.ph));
  o += "<g class=\"ticks\" fill=\"#333333\">\n";
  for (double t : f.xt)
    o += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", num(f.px(t)), num(kTop + f.ph + 16),
                     tick_text(t, f.x_scale == XScale::kLinear ? f.x_step : t));
  for (double t : f.yt)
    o += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", num(kLeft - 6), num(f.py(t) + 4),
                     tick_text(t, f.log_y ? t : f.y_step));
  o += "</g>\n";
  o += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"13\">{}</text>\n",
                   num(kLeft + f.plot_w / 2), num(kTop + f.ph + 36), escape_html(chart.x_label));
  o += fmt::format(
      "<text transform=\"translate(16,{}) rotate(-90)\" text-anchor=\"middle\" font-size=\"13\">{}</text>\n",
      num(kTop + f.ph / 2), escape_html(chart.y_label));
  return o;
}

// The palette index series k is drawn in (kNeutralColour: grey).
int colour_index(const ChartSeries& s, size_t k) { return s.colour == -1 ? static_cast<int>(k) : s.colour; }

std::string colour_of(const ChartSeries& s, size_t k) { return colour_of_index(colour_index(s, k)); }

std::string dash_of(const ChartSeries& s, size_t k) {
  if (!s.dash_pattern.empty()) return fmt::format(" stroke-dasharray=\"{}\"", s.dash_pattern);
  return s.dashed ? " stroke-dasharray=\"8,4\""
         : colour_index(s, k) >= 0 && palette_repeats(static_cast<size_t>(colour_index(s, k)))
             ? " stroke-dasharray=\"6,3\""
             : "";
}

// Series k's min..max band (nothing when it has none).
std::string svg_band(const ChartSeries& s, size_t k, const Frame& f) {
  std::string upper, lower;
  for (size_t i = 0; i < s.x.size() && i < s.lo.size() && i < s.hi.size(); ++i) {
    if (!f.x_ok(s.x[i]) || !f.y_ok(s.lo[i]) || !f.y_ok(s.hi[i])) continue;
    upper += fmt::format("{}{},{}", upper.empty() ? "M" : " L", num(f.px(s.x[i])), num(f.py(s.hi[i])));
  }
  for (size_t j = std::min({s.x.size(), s.lo.size(), s.hi.size()}); j-- > 0;) {
    if (!f.x_ok(s.x[j]) || !f.y_ok(s.lo[j]) || !f.y_ok(s.hi[j])) continue;
    lower += fmt::format(" L{},{}", num(f.px(s.x[j])), num(f.py(s.lo[j])));
  }
  if (upper.empty()) return "";
  return fmt::format("<path class=\"band\" d=\"{}{} Z\" fill=\"{}\" fill-opacity=\"0.18\" stroke=\"none\"/>\n", upper,
                     lower, colour_of(s, k));
}

// The end of an error bar at pixel y: a cap, or where the bar reached past the axis an arrow
// pointing on (`dir` -1 up, +1 down).
std::string bar_end(double x, double y, bool clipped, int dir) {
  if (!clipped) return fmt::format(" M{},{} L{},{}", num(x - 4), num(y), num(x + 4), num(y));
  return fmt::format(" M{},{} L{},{} L{},{}", num(x - 4), num(y - 6 * dir), num(x), num(y), num(x + 4),
                     num(y - 6 * dir));
}

// Series k's error bars (a vertical line with caps at each point that has both ends), drawn to the
// axis's edge with an arrow where they reach past it.
std::string svg_error_bars(const ChartSeries& s, size_t k, const Frame& f) {
  std::string o;
  for (size_t i = 0; i < s.x.size() && i < s.err_lo.size() && i < s.err_hi.size(); ++i) {
    if (!f.x_ok(s.x[i]) || !f.y_ok(s.err_lo[i]) || !f.y_ok(s.err_hi[i])) continue;
    const bool low_clipped = s.err_lo[i]<f.ya, high_clipped = s.err_hi[i]> f.yb;
    const double x = f.px(s.x[i]), lo = f.py(std::max(s.err_lo[i], f.ya)), hi = f.py(std::min(s.err_hi[i], f.yb));
    o += fmt::format("<path class=\"error-bar{}\" d=\"M{},{} L{},{}{}{}\"/>",
                     low_clipped || high_clipped ? " clipped" : "", num(x), num(lo), num(x), num(hi),
                     bar_end(x, lo, low_clipped, 1), bar_end(x, hi, high_clipped, -1));
  }
  if (o.empty()) return o;
  return fmt::format("<g stroke=\"{}\" stroke-width=\"1.5\" fill=\"none\">{}</g>\n", colour_of(s, k), o);
}

// Series k's reference line, mean line, error bars and point markers.
std::string svg_line(const ChartSeries& s, size_t k, const Frame& f) {
  std::string o, d, markers;
  if (f.y_ok(s.reference_y))
    o += fmt::format(
        "<line class=\"reference\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"1.5\" "
        "stroke-dasharray=\"2,4\"/>\n",
        num(kLeft), num(f.py(s.reference_y)), num(kLeft + f.plot_w), num(f.py(s.reference_y)), colour_of(s, k));
  for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
    if (!f.x_ok(s.x[i]) || !f.y_ok(s.y[i])) continue;
    const double x = f.px(s.x[i]), y = f.py(s.y[i]);
    d += fmt::format("{}{},{}", d.empty() ? "M" : " L", num(x), num(y));
    const bool own = i < s.point_colour.size() && s.point_colour[i] != -1;
    if (s.markers || own)
      markers += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"{}\"{}/>", num(x), num(y),
                             s.x.size() == 1 || own ? "5" : "2.5",  // a lone point is a marked value
                             own ? fmt::format(" fill=\"{}\"", colour_of_index(s.point_colour[i])) : "");
    if (i < s.point_label.size() && !s.point_label[i].empty())
      markers += fmt::format("<text class=\"point-label\" x=\"{}\" y=\"{}\" fill=\"#333333\">{}</text>", num(x + 7),
                             num(y - 7), escape_html(s.point_label[i]));
  }
  if (d.empty()) return o;
  o += fmt::format("<g class=\"series\" fill=\"{}\"><title>{}</title>\n", colour_of(s, k), escape_html(s.label));
  o += fmt::format("<path class=\"line\" d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\"{}/>\n", d,
                   colour_of(s, k), dash_of(s, k));
  o += svg_error_bars(s, k, f);
  return o + fmt::format("{}\n</g>\n", markers);
}

// One row per series, its label wrapped (<tspan> lines) to stay inside the chart's width.
std::string svg_legend(const LineChart& chart, const Frame& f) {
  std::string o;
  double y = f.legend_y;
  for (size_t k = 0; k < chart.series.size(); ++k) {
    const std::string dash = dash_of(chart.series[k], k);
    const auto lines = wrap_label(chart.series[k].label, legend_chars(f.w));
    std::string text = escape_html(lines.front());
    for (size_t i = 1; i < lines.size(); ++i)
      text += fmt::format("<tspan x=\"{}\" dy=\"{}\">{}</tspan>", num(kLegendTextX), num(kLegendLine),
                          escape_html(lines[i]));
    o += fmt::format(
        "<g class=\"legend\"><line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"3\"{}/>"
        "<text x=\"{}\" y=\"{}\">{}</text></g>\n",
        num(kLeft), num(y), num(kLeft + 24), num(y), colour_of(chart.series[k], k), dash, num(kLegendTextX), num(y + 4),
        text);
    y += kLegendRow + kLegendLine * static_cast<double>(lines.size() - 1);
  }
  return o;
}
}  // namespace

std::string render_svg(const LineChart& chart) {
  const Frame f = frame_of(chart);
  std::string o = svg_head(chart, f) + svg_axes(chart, f);
  // Bands first (under every line), then lines and point markers.
  for (size_t k = 0; k < chart.series.size(); ++k) o += svg_band(chart.series[k], k, f);
  for (size_t k = 0; k < chart.series.size(); ++k) o += svg_line(chart.series[k], k, f);
  return o + svg_legend(chart, f) + "</svg>\n";
}

namespace {
// A ramp through (255,255,204) (65,182,196) (8,29,88) at t = 0, 0.5, 1 (ColorBrewer YlGnBu's ends).
std::string ramp(double t) {
  const double stops[3][3] = {{255, 255, 204}, {65, 182, 196}, {8, 29, 88}};
  t = std::clamp(t, 0.0, 1.0);
  const int i = t < 0.5 ? 0 : 1;
  const double f = (t - 0.5 * i) / 0.5;
  int c[3];
  for (int k = 0; k < 3; ++k) c[k] = static_cast<int>(std::lround(stops[i][k] + f * (stops[i + 1][k] - stops[i][k])));
  return fmt::format("#{:02X}{:02X}{:02X}", c[0], c[1], c[2]);
}
}  // namespace

std::string render_heatmap(const Heatmap& m) {
  constexpr double kCellW = 150, kCellH = 44, kLeftH = 150, kTopH = 60;
  const double cols = static_cast<double>(m.x_values.size()), rows = static_cast<double>(m.y_values.size());
  const double w = std::max(640.0, kLeftH + cols * kCellW + 20), h = kTopH + rows * kCellH + 70;
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  for (const auto& row : m.z)
    for (double v : row)
      if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  std::string o = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"chart-{0}\" class=\"chart heatmap\" width=\"{1:g}\" "
      "height=\"{2:g}\" "
      "viewBox=\"0 0 {1:g} {2:g}\" font-family=\"sans-serif\" font-size=\"12\" role=\"img\" aria-label=\"{3}\">\n"
      "<title>{3}</title>\n<rect x=\"0\" y=\"0\" width=\"{1:g}\" height=\"{2:g}\" fill=\"#ffffff\"/>\n"
      "<text x=\"{4}\" y=\"22\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">{3}</text>\n",
      escape_html(m.id), w, h, escape_html(m.title), num(w / 2));
  for (size_t c = 0; c < m.x_values.size(); ++c)
    o += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", num(kLeftH + (c + 0.5) * kCellW),
                     num(kTopH - 6), escape_html(m.x_values[c]));
  for (size_t r = 0; r < m.y_values.size(); ++r) {
    o += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", num(kLeftH - 8),
                     num(kTopH + (r + 0.5) * kCellH + 4), escape_html(m.y_values[r]));
    for (size_t c = 0; c < m.x_values.size(); ++c) {
      const double v = r < m.z.size() && c < m.z[r].size() ? m.z[r][c] : std::nan("");
      const double t = hi > lo ? (v - lo) / (hi - lo) : 0.5;
      const std::string label = r < m.text.size() && c < m.text[r].size() ? m.text[r][c] : "";
      o += fmt::format(
          "<rect class=\"cell\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" stroke=\"#ffffff\"/>"
          "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"{}\">{}</text>\n",
          num(kLeftH + c * kCellW), num(kTopH + r * kCellH), num(kCellW), num(kCellH),
          std::isfinite(v) ? ramp(t) : std::string("#dddddd"), num(kLeftH + (c + 0.5) * kCellW),
          num(kTopH + (r + 0.5) * kCellH + 4), std::isfinite(v) && t > 0.55 ? "#ffffff" : "#222222",
          escape_html(label));
    }
  }
  o += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"13\">{}</text>\n",
                   num(kLeftH + cols * kCellW / 2), num(kTopH + rows * kCellH + 24), escape_html(m.x_label));
  o += fmt::format("<text x=\"10\" y=\"{}\" font-size=\"13\">{}</text>\n", num(kTopH - 6), escape_html(m.y_label));
  o += fmt::format("<text x=\"10\" y=\"{}\" fill=\"#555555\">colour: {} (light {} \xE2\x80\x94 dark {})</text>\n",
                   num(h - 14), escape_html(m.z_label), std::isfinite(lo) ? fmt::format("{:.2f}", lo) : "",
                   std::isfinite(hi) ? fmt::format("{:.2f}", hi) : "");
  return o + "</svg>\n";
}

}  // namespace ddplab::report
