#include "ddplab/report/svg.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

namespace ddplab::report {

namespace {
const char* const kPalette[] = {"#0072B2", "#E69F00", "#009E73", "#CC79A7",
                                "#56B4E9", "#D55E00", "#F0E442", "#000000"};
constexpr size_t kPaletteSize = sizeof(kPalette) / sizeof(kPalette[0]);

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

std::string tick_text(double v, double step) {
  if (std::fabs(v) < step * 1e-9) v = 0;
  char buf[32];
  const double a = std::fabs(v);
  if (a != 0 && (a >= 1e5 || a < 1e-3)) {
    std::snprintf(buf, sizeof buf, "%.2g", v);
  } else {
    const int decimals = step >= 1 ? 0 : std::min(6, static_cast<int>(std::ceil(-std::log10(step) - 1e-9)));
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  }
  return buf;
}
}  // namespace

std::string escape_html(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string palette_colour(size_t i) { return kPalette[i % kPaletteSize]; }

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {};
  if (hi < lo) std::swap(lo, hi);
  if (hi == lo) {
    const double pad = lo == 0 ? 1 : std::fabs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  const double raw = (hi - lo) / std::max(1, target);
  const double mag = std::pow(10, std::floor(std::log10(raw)));
  const double frac = raw / mag;
  const double step = (frac <= 1 ? 1 : frac <= 2 ? 2 : frac <= 5 ? 5 : 10) * mag;
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

std::string render_svg(const LineChart& chart) {
  constexpr double kLeft = 70, kRight = 20, kTop = 40, kBottom = 50, kLegendRow = 20;
  const double w = chart.width, ph = chart.plot_height;
  const double plot_w = w - kLeft - kRight;

  // A y value that can be drawn: finite, and positive on a log axis.
  const bool log_y = chart.log_y;
  auto y_ok = [&](double v) { return std::isfinite(v) && (!log_y || v > 0); };
  double x_lo = std::numeric_limits<double>::infinity(), x_hi = -x_lo, y_lo = x_lo, y_hi = -x_lo;
  auto widen = [](double v, double& lo, double& hi) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  };
  for (const auto& s : chart.series) {
    for (size_t i = 0; i < s.x.size(); ++i) {
      if (!std::isfinite(s.x[i]) || i >= s.y.size() || !y_ok(s.y[i])) continue;
      widen(s.x[i], x_lo, x_hi);
      widen(s.y[i], y_lo, y_hi);
      if (i < s.lo.size() && y_ok(s.lo[i])) widen(s.lo[i], y_lo, y_hi);
      if (i < s.hi.size() && y_ok(s.hi[i])) widen(s.hi[i], y_lo, y_hi);
    }
  }
  if (!std::isfinite(x_lo)) x_lo = 0, x_hi = 1, y_lo = log_y ? 1 : 0, y_hi = log_y ? 10 : 1;
  for (const auto& s : chart.series)
    if (y_ok(s.reference_y)) widen(s.reference_y, y_lo, y_hi);
  const std::vector<double> xt = nice_ticks(x_lo, x_hi, 8), yt = log_y ? log_ticks(y_lo, y_hi) : nice_ticks(y_lo, y_hi, 6);
  const double xa = xt.front(), xb = xt.back(), ya = yt.front(), yb = yt.back();
  const double x_step = xt.size() > 1 ? xt[1] - xt[0] : 1, y_step = yt.size() > 1 ? yt[1] - yt[0] : 1;
  auto px = [&](double x) { return kLeft + (x - xa) / (xb - xa) * plot_w; };
  auto py = [&](double y) {
    const double f = log_y ? (std::log10(y) - std::log10(ya)) / (std::log10(yb) - std::log10(ya)) : (y - ya) / (yb - ya);
    return kTop + ph - f * ph;
  };

  const double legend_y = kTop + ph + kBottom;
  const double h = legend_y + kLegendRow * static_cast<double>(chart.series.size()) + 10;
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"chart-" << escape_html(chart.id) << "\" class=\"chart\" width=\""
    << w << "\" height=\"" << num(h) << "\" viewBox=\"0 0 " << w << ' ' << num(h)
    << "\" font-family=\"sans-serif\" font-size=\"12\" role=\"img\" aria-label=\"" << escape_html(chart.title)
    << "\">\n";
  o << "<title>" << escape_html(chart.title) << "</title>\n";
  o << "<rect x=\"0\" y=\"0\" width=\"" << w << "\" height=\"" << num(h) << "\" fill=\"#ffffff\"/>\n";
  o << "<text x=\"" << num(w / 2) << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\" font-weight=\"bold\">"
    << escape_html(chart.title) << "</text>\n";

  // Grid and ticks.
  o << "<g class=\"axes\" stroke=\"#dddddd\" stroke-width=\"1\">\n";
  for (double t : xt)
    o << "<line x1=\"" << num(px(t)) << "\" y1=\"" << num(kTop) << "\" x2=\"" << num(px(t)) << "\" y2=\""
      << num(kTop + ph) << "\"/>\n";
  for (double t : yt)
    o << "<line x1=\"" << num(kLeft) << "\" y1=\"" << num(py(t)) << "\" x2=\"" << num(kLeft + plot_w) << "\" y2=\""
      << num(py(t)) << "\"/>\n";
  o << "</g>\n";
  o << "<rect x=\"" << num(kLeft) << "\" y=\"" << num(kTop) << "\" width=\"" << num(plot_w) << "\" height=\""
    << num(ph) << "\" fill=\"none\" stroke=\"#333333\"/>\n";
  o << "<g class=\"ticks\" fill=\"#333333\">\n";
  for (double t : xt)
    o << "<text x=\"" << num(px(t)) << "\" y=\"" << num(kTop + ph + 16) << "\" text-anchor=\"middle\">"
      << tick_text(t, x_step) << "</text>\n";
  for (double t : yt)
    o << "<text x=\"" << num(kLeft - 6) << "\" y=\"" << num(py(t) + 4) << "\" text-anchor=\"end\">"
      << tick_text(t, log_y ? t : y_step) << "</text>\n";
  o << "</g>\n";
  o << "<text x=\"" << num(kLeft + plot_w / 2) << "\" y=\"" << num(kTop + ph + 36)
    << "\" text-anchor=\"middle\" font-size=\"13\">" << escape_html(chart.x_label) << "</text>\n";
  o << "<text transform=\"translate(16," << num(kTop + ph / 2)
    << ") rotate(-90)\" text-anchor=\"middle\" font-size=\"13\">"
    << escape_html(chart.y_label) << "</text>\n";

  // Bands first (under every line), then lines and point markers.
  for (size_t k = 0; k < chart.series.size(); ++k) {
    const auto& s = chart.series[k];
    std::string upper, lower;
    for (size_t i = 0; i < s.x.size() && i < s.lo.size() && i < s.hi.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !y_ok(s.lo[i]) || !y_ok(s.hi[i])) continue;
      upper += (upper.empty() ? "M" : " L") + num(px(s.x[i])) + ',' + num(py(s.hi[i]));
    }
    for (size_t j = std::min({s.x.size(), s.lo.size(), s.hi.size()}); j-- > 0;) {
      if (!std::isfinite(s.x[j]) || !y_ok(s.lo[j]) || !y_ok(s.hi[j])) continue;
      lower += " L" + num(px(s.x[j])) + ',' + num(py(s.lo[j]));
    }
    if (!upper.empty())
      o << "<path class=\"band\" d=\"" << upper << lower << " Z\" fill=\"" << palette_colour(k)
        << "\" fill-opacity=\"0.18\" stroke=\"none\"/>\n";
  }
  for (size_t k = 0; k < chart.series.size(); ++k) {
    const auto& s = chart.series[k];
    const std::string dash = k >= kPaletteSize ? " stroke-dasharray=\"6,3\"" : "";
    std::string d, markers;
    if (y_ok(s.reference_y))
      o << "<line class=\"reference\" x1=\"" << num(kLeft) << "\" y1=\"" << num(py(s.reference_y)) << "\" x2=\""
        << num(kLeft + plot_w) << "\" y2=\"" << num(py(s.reference_y)) << "\" stroke=\"" << palette_colour(k)
        << "\" stroke-width=\"1.5\" stroke-dasharray=\"2,4\"/>\n";
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !y_ok(s.y[i])) continue;
      d += (d.empty() ? "M" : " L") + num(px(s.x[i])) + ',' + num(py(s.y[i]));
      markers += "<circle cx=\"" + num(px(s.x[i])) + "\" cy=\"" + num(py(s.y[i])) + "\" r=\"2.5\"/>";
    }
    if (d.empty()) continue;
    o << "<g class=\"series\" fill=\"" << palette_colour(k) << "\"><title>" << escape_html(s.label) << "</title>\n";
    o << "<path class=\"line\" d=\"" << d << "\" fill=\"none\" stroke=\"" << palette_colour(k)
      << "\" stroke-width=\"2\"" << dash << "/>\n";
    o << markers << "\n</g>\n";
  }

  // Legend.
  for (size_t k = 0; k < chart.series.size(); ++k) {
    const double y = legend_y + kLegendRow * static_cast<double>(k);
    const std::string dash = k >= kPaletteSize ? " stroke-dasharray=\"6,3\"" : "";
    o << "<g class=\"legend\"><line x1=\"" << num(kLeft) << "\" y1=\"" << num(y) << "\" x2=\"" << num(kLeft + 24)
      << "\" y2=\"" << num(y) << "\" stroke=\"" << palette_colour(k) << "\" stroke-width=\"3\"" << dash << "/>"
      << "<text x=\"" << num(kLeft + 30) << "\" y=\"" << num(y + 4) << "\">" << escape_html(chart.series[k].label)
      << "</text></g>\n";
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace ddplab::report
