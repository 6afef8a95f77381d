// Hand-written SVG line charts for the comparison report: one mean line per series with a
// shaded min..max band, optional error bars and an optional dashed reference line, axes with
// "nice" ticks (1/2/5 x 10^k, whole numbers only on an integer axis; linear or logarithmic y; x
// linear, log10 or log2 with ticks at powers of 2), axis labels, a title and a legend below the plot (a
// label too long for the chart's width wraps onto more lines and the chart grows, so no legend
// text is clipped). Colours follow the Okabe-Ito colour-blind-safe palette (8 colours; beyond 8
// the colours repeat with a dashed line); the report gives each arm (group) one palette index in
// every chart, and draws a line over several arms in grey (kNeutralColour) with its points in
// their arms' colours. Every user string is escaped.
#pragma once
#include <limits>
#include <string>
#include <vector>

namespace ddplab::report {

// Escapes & < > " ' for HTML and XML text and attribute values.
std::string escape_html(const std::string& text);

struct ChartSeries {
  std::string label;       // the legend text (a group label)
  std::vector<double> x;   // ascending
  std::vector<double> y;   // the mean line, same length as x
  std::vector<double> lo;  // band lower edge (min over seeds); empty: no band
  std::vector<double> hi;  // band upper edge (max over seeds); same length as lo
  // A dashed horizontal line at this y in the series' colour (e.g. a group's global batch on the
  // noise-scale chart); NaN: none.
  double reference_y = std::numeric_limits<double>::quiet_NaN();
  // Error bars (e.g. a 95% interval) from err_lo[i] to err_hi[i] at x[i]; empty: none.
  std::vector<double> err_lo, err_hi;
  bool dashed = false;       // a dashed line (a model or an ideal rather than a measurement)
  std::string dash_pattern;  // a stroke-dasharray ("2,3") that tells grey lines apart; empty: by `dashed`
  bool markers = true;       // point markers at the data points
  int colour = -1;           // palette index; -1: the series' own index; kNeutralColour: grey
  // Per point (same length as x, or empty): the marker's palette index (-1: the series' colour)
  // and a text drawn beside the marker ("" or empty: none).
  std::vector<int> point_colour;
  std::vector<std::string> point_label;
};

// ChartSeries::colour of a line that is no one arm's (it joins several): grey; a model or ideal
// drawn beside such a line: light grey.
constexpr int kNeutralColour = -2;
constexpr int kLightNeutralColour = -3;

enum class XScale { kLinear, kLog10, kLog2 };

struct LineChart {
  std::string id;       // file stem and element id, e.g. "test_acc" (not user text)
  std::string title;    // "Test accuracy vs epoch"
  std::string x_label;  // "epoch"
  std::string y_label;  // "test accuracy"
  std::vector<ChartSeries> series;
  int width = 760;  // pixels; the height grows with the legend
  int plot_height = 360;
  bool log_y = false;                // logarithmic y axis (ticks 1/2/5 x 10^k); values <= 0 are skipped
  XScale x_scale = XScale::kLinear;  // log scales skip x <= 0
  bool integer_x = false;            // x takes whole values (epochs, replicas): whole-number ticks only
  // The values y can take (accuracy in percent: 0 and 100). The axis never extends past them for
  // an error bar; a bar that reaches past the axis is drawn to its edge and ends in an arrow.
  double y_floor = -std::numeric_limits<double>::infinity();
  double y_ceil = std::numeric_limits<double>::infinity();
};

// A chart with these texts and no series yet (the other fields at their defaults).
LineChart line_chart(std::string id, std::string title, std::string x_label, std::string y_label);

// The Okabe-Ito colour of series `i` (cycling), as "#RRGGBB".
std::string palette_colour(size_t i);
// Whether series `i` is past the palette, so its colour repeats an earlier one's and it is dashed.
bool palette_repeats(size_t i);
// palette_colour(i) for i >= 0, the greys of kNeutralColour and kLightNeutralColour for them.
std::string colour_of_index(int i);

// A standalone <svg> element with xmlns (valid both as a .svg file and inline in HTML).
// Series with no points are listed in the legend only; non-finite values are skipped.
std::string render_svg(const LineChart& chart);

// A grid of cells coloured by value (a sequential, colour-blind-safe ramp from light yellow to dark
// blue; darker is higher), each cell labelled with its text, for a metric over two swept axes.
struct Heatmap {
  std::string id, title, x_label, y_label;
  std::vector<std::string> x_values, y_values;  // column and row headings, in order
  std::vector<std::vector<double>> z;           // z[row][column]; NaN: no value (grey)
  std::vector<std::vector<std::string>> text;   // the same shape: what each cell says
  std::string z_label;                          // what the colour means
};
std::string render_heatmap(const Heatmap& map);

// Tick positions covering [lo, hi] with about `target` ticks at 1/2/5 x 10^k steps; with
// `integer`, steps of at least 1 (an axis of whole numbers has no tick at 1.2).
std::vector<double> nice_ticks(double lo, double hi, int target = 6, bool integer = false);
// Powers of 2 covering [lo, hi] (both > 0), from the one at or below lo to the one at or above
// hi (every other power when there are more than 12).
std::vector<double> log2_ticks(double lo, double hi);
// Ticks for a logarithmic axis covering [lo, hi] (both > 0): 1, 2, 5 x 10^k (only the powers of
// ten when the range spans more than 3 decades), from the one at or below lo to the one at or above hi.
std::vector<double> log_ticks(double lo, double hi);

}  // namespace ddplab::report
