// make_plan and check_plan on run directories written from known models (no training): a
// calibration's runs are measured as calibration.h says, the models are recovered and the
// predictions of cells the calibration did not run land within the stated tolerances.
#include "ddplab/plan/plan.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <regex>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include "ddplab/plan/check.h"
#include "test_util.h"

namespace ddplab::plan {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

constexpr double kSmin = 300, kBcrit = 200, kTargetLoss = 0.5;
constexpr int64_t kTrainSamples = 8192;
constexpr double kEvalS = 2.0, kStartupS = 5.0;

// T_comp(b) = alpha + beta b: the line through two of its points.
ComputeCurve line(double alpha, double beta) { return {{{1, alpha + beta}, {2, alpha + 2 * beta}}}; }

StepTimeModel truth() {
  StepTimeModel m;
  m.compute[1] = line(0.004, 0.0005);
  m.compute[2] = line(0.004, 0.0005);
  m.payload_bytes = 4e6;
  m.buckets = 1;
  m.seconds_per_byte = 1 / 2e8;
  m.overlap = 2;
  return m;
}

double true_steps(double batch) { return kSmin * (1 + kBcrit / batch); }

struct SyntheticRun {
  int replicas = 1;
  int64_t global_batch = 64;
  int seed = 1;
  int epochs = 0;  // 0: enough to pass the target by half again
  std::string status = "done";
  bool collapse = false;             // end near chance (final training accuracy 10%, test 5%)
  bool never = false;                // the loss never reaches the target
  json spec_patch = json::object();  // merged into spec.json (the lr rule)
  double noise_scale = kBcrit;       // B_simple in its epoch records (2+ replicas)
  double cpu_wait_pct = 1;           // host_cpu_wait_pct of every epoch record
  double slowdown = 1;               // its step times are the model's times this
  double steps_factor = 1;           // it reaches the target at true_steps x this
  std::string day = "2026-01-01";    // of its manifest's start and end (kHeldOutDay: after any plan made here)
};

// The day of held-out runs: after the plans the tests make (now), as `--check` requires.
constexpr const char* kHeldOutDay = "2099-01-01";

SyntheticRun held_out(int replicas, int64_t batch, int seed = 1) {
  SyntheticRun r{replicas, batch, seed};
  r.day = kHeldOutDay;
  return r;
}

// Step records every 5 steps with a training loss falling linearly through the target at
// true_steps(B) (a line, so the report's centred running mean crosses where the line does).
std::string step_lines(const SyntheticRun& r, int64_t total_steps, double step_s) {
  std::string out;
  const double s = r.steps_factor * true_steps(static_cast<double>(r.global_batch));
  for (int64_t k = 5; k <= total_steps; k += 5) {
    const double loss = r.never ? 1.0 : std::max(0.05, kTargetLoss + 0.5 * (s - k) / s);
    out +=
        json{{"step", k},
             {"epoch", static_cast<double>(k * r.global_batch) / kTrainSamples},
             {"interval_steps", 5},
             {"lr", 0.1},
             {"train_loss", loss},
             {"train_acc", 0.8},
             {"samples", k * r.global_batch},
             {"elapsed_s", k * step_s + kEvalS * std::floor(static_cast<double>(k * r.global_batch) / kTrainSamples)}}
            .dump() +
        "\n";
  }
  return out;
}

fs::path write_synthetic(const fs::path& root, const SyntheticRun& r) {
  const StepTimeModel m = truth();
  const int64_t spe = (kTrainSamples + r.global_batch - 1) / r.global_batch;
  const double b = static_cast<double>(r.global_batch) / r.replicas;
  const double step_s = r.slowdown * m.step_s(r.replicas, b), wait_s = m.exposed_comm_s(r.replicas, b);
  const int epochs = r.epochs > 0
                         ? r.epochs
                         : static_cast<int>(std::ceil(1.5 * true_steps(static_cast<double>(r.global_batch)) / spe));
  const fs::path dir = root / fmt::format("replicas={},batch={},seed={}", r.replicas, r.global_batch, r.seed);
  fs::create_directories(dir);
  json spec = {{"name", "synthetic"},
               {"seed", r.seed},
               {"dataset", {{"name", "fashion-mnist"}}},
               {"schedule", {{"warmup_epochs", 0}}},
               {"replicas", {{"count", r.replicas}, {"bucket_mb", 25}}},
               {"batch", {{"global", r.global_batch}}}};
  spec.merge_patch(r.spec_patch);
  testing::write_file(dir / "spec.json", spec.dump());
  std::string lines;
  double wall = 0;
  for (int e = 1; e <= epochs; ++e) {
    wall += spe * step_s + kEvalS;
    lines += json{{"epoch", e},
                  {"step", e * spe},
                  {"lr", 0.1},
                  {"train_loss", r.collapse ? 2.3 : 0.3},
                  {"train_acc", r.collapse ? 0.1 : 0.9},
                  {"test_loss", 0.4},
                  {"test_acc", r.collapse ? 0.05 : 0.88},
                  {"epoch_s", spe * step_s},
                  {"wall_s", wall},
                  {"images_per_s", r.global_batch / step_s},
                  {"comm_wait_s", spe * wait_s},
                  {"grad_norm", 1.0},
                  {"grad_noise_scale", r.replicas > 1 ? json(r.noise_scale) : json()},
                  {"comm_bytes", static_cast<int64_t>(spe * ring_factor(r.replicas) * m.payload_bytes)},
                  {"replicas", r.replicas},
                  {"global_batch", r.global_batch},
                  {"host_cpu_wait_pct", r.cpu_wait_pct},
                  {"host_steal_pct", 0.0}}
                 .dump() +
             "\n";
  }
  testing::write_file(dir / "epochs.jsonl", lines);
  testing::write_file(dir / "steps.jsonl", step_lines(r, epochs * spe, step_s));
  const auto end = static_cast<int>(std::ceil(wall + kStartupS));
  testing::write_file(dir / "manifest.json",
                      json{{"status", r.status},
                           {"run_id", dir.filename().string()},
                           {"start", r.day + "T00:00:00Z"},
                           {"end", fmt::format("{}T{:02d}:{:02d}:{:02d}Z", r.day, end / 3600, end / 60 % 60, end % 60)}}
                          .dump());
  return dir;
}

// Steps runs at 2 replicas (batches 64 and 256), timing runs at 1 replica (32 and 128 per replica).
fs::path write_calibration(const fs::path& root) {
  for (int64_t b : {64, 256}) write_synthetic(root, {2, b});
  for (int64_t b : {32, 128}) write_synthetic(root, {1, b, 1, 1});
  return root;
}

Target loss_target() {
  Target t;
  t.loss = kTargetLoss;
  return t;
}

TEST(Plan, RecoversTheModelsAndPredictsHeldOutCells) {
  testing::TempDir tmp;
  const Calibration c = read_calibration({write_calibration(tmp.path() / "cal")}, loss_target());
  const Plan p = make_plan(c, parse_grid({"replicas=1,2", "batch=64,128,256,512"}));
  ASSERT_TRUE(p.steps_fit.has_value());
  // Steps: read at 5-step records from a running mean, so within 3% of S_min and B_crit.
  EXPECT_NEAR(p.steps_fit->s_min, kSmin, 0.03 * kSmin);
  EXPECT_NEAR(p.steps_fit->b_crit, kBcrit, 0.03 * kBcrit);
  EXPECT_EQ(p.steps_source, "McCandlish fit within the calibrated batches, noise scale beyond them");
  EXPECT_LT(p.steps_gap, 0.03);  // phi = B_crit: both estimates agree
  const StepTimeModel m = truth();
  ASSERT_EQ(p.cells.size(), 8u);
  for (const auto& cell : p.cells) {
    const double b = cell.per_replica_batch, steps = true_steps(static_cast<double>(cell.global_batch));
    EXPECT_NEAR(cell.step_s / m.step_s(cell.replicas, b), 1, 0.02) << cell.replicas << " x " << b;
    EXPECT_NEAR(cell.steps / steps, 1, 0.03) << cell.global_batch;
    const double evals = std::floor(steps * cell.global_batch / kTrainSamples);
    const double ttt = steps * m.step_s(cell.replicas, b) + evals * kEvalS + kStartupS;
    EXPECT_NEAR(cell.time_to_target_s / ttt, 1, 0.05) << cell.replicas << " x " << b;
  }
  // The steps runs measured the time to target at 2 x 64 and 2 x 256; the one-epoch timing run at
  // 1 x 128 measured a step time only, so that cell stays held out.
  for (const auto& cell : p.cells)
    EXPECT_EQ(cell.calibrated, cell.replicas == 2 && (cell.global_batch == 64 || cell.global_batch == 256))
        << cell.replicas << " x " << cell.global_batch;
  ASSERT_TRUE(p.fastest && p.cheapest);
  EXPECT_LE(p.cells[*p.cheapest].time_to_target_s, 1.1 * p.cells[*p.fastest].time_to_target_s);
  EXPECT_EQ(p.hash, seal_of(p.to_json()));
  EXPECT_EQ(p.hash.size(), 64u);
}

// Two seeds a batch, one 10% slower to the target: the seed CV pools them (0.1 / sqrt 2 / 1.05 at
// every batch, within the records' 5-step grain), every cell's 80% interval holds its prediction and spans z x that CV
// either way beyond the steps models' range, and the recommendation says how sure it is; held-out runs at the true
// steps fall inside, and --check counts them, scoring each steps rule alone beside the plan.
TEST(Plan, IntervalsHoldTheSeedSpreadAndCheckCountsTheirCoverage) {
  testing::TempDir tmp;
  for (int64_t b : {64, 256})
    for (int seed : {1, 2}) {
      SyntheticRun r{2, b, seed};
      r.steps_factor = seed == 1 ? 1.0 : 1.1;
      write_synthetic(tmp.path() / "cal", r);
    }
  for (int64_t b : {32, 128}) write_synthetic(tmp.path() / "cal", {1, b, 1, 1});
  const Plan p =
      make_plan(read_calibration({tmp.path() / "cal"}, loss_target()), parse_grid({"replicas=1,2", "batch=128,512"}));
  const double cv = 0.1 / std::sqrt(2.0) / 1.05;
  EXPECT_NEAR(p.spread.seed_cv, cv, 3e-3) << "steps to the target read from records every 5 steps";
  EXPECT_EQ(p.spread.seed_batches, 2);
  for (const auto& c : p.cells) {
    EXPECT_LE(c.ttt_low_s, c.time_to_target_s) << c.replicas << " x " << c.global_batch;
    EXPECT_GE(c.ttt_high_s, c.time_to_target_s) << c.replicas << " x " << c.global_batch;
    const double width = kIntervalZ * std::hypot(p.spread.seed_cv, p.spread.step_log_rms);
    const double lo = std::min({c.time_to_target_s, c.fit_ttt_s, c.noise_ttt_s});
    const double hi = std::max({c.time_to_target_s, c.fit_ttt_s, c.noise_ttt_s});
    EXPECT_NEAR(std::log(c.ttt_low_s / lo), -width, 1e-3) << c.replicas << " x " << c.global_batch;
    EXPECT_NEAR(std::log(c.ttt_high_s / hi), width, 1e-3) << c.replicas << " x " << c.global_batch;
  }
  EXPECT_NE(render_plan_markdown(p).find("How sure: 80% interval"), std::string::npos);
  write_plan(p, tmp.path() / "plan");
  for (int seed : {1, 2})
    for (int64_t b : {128, 512}) write_synthetic(tmp.path() / "held", held_out(2, b, seed));
  const CheckResult r = check_plan(tmp.path() / "plan" / "plan.json", {tmp.path() / "held"});
  EXPECT_EQ(r.coverage.cells, 2);
  EXPECT_EQ(r.coverage.covered, 2);
  EXPECT_EQ(r.fit_only.cells, 2);
  EXPECT_EQ(r.noise_only.cells, 2);
  EXPECT_EQ(r.planner_unfiltered.cells, 2);
  EXPECT_NE(render_check_markdown(r).find("The 80% intervals held the measured mean time to target in 2 of 2"),
            std::string::npos)
      << render_check_markdown(r);
}

// Timing runs on a busy host (one replica's at 95% CPU wait, 3 x slower): every cell whose step
// time they set is flagged, the scaling efficiency above 1 that they cause is flagged with that
// cause, and the plan's notes say so; a quiet calibration has none of these flags.
TEST(Plan, ACalibrationOnABusyHostIsFlagged) {
  testing::TempDir tmp;
  for (int64_t b : {64, 256}) write_synthetic(tmp.path() / "busy", {2, b});
  for (int64_t b : {32, 128}) {
    SyntheticRun r{1, b, 1, 1};
    r.cpu_wait_pct = 95;
    r.slowdown = 3;
    write_synthetic(tmp.path() / "busy", r);
  }
  const auto grid = parse_grid({"replicas=1,2", "batch=64,128,256"});
  const Plan busy = make_plan(read_calibration({tmp.path() / "busy"}, loss_target()), grid);
  const auto has = [](const CellPlan& c, const std::string& text) {
    return std::any_of(c.flags.begin(), c.flags.end(), [&](const auto& f) { return f.find(text) != f.npos; });
  };
  int above_one = 0;
  for (const auto& cell : busy.cells) {
    EXPECT_EQ(has(cell, "step time at 1 replica timed under load (replicas=1,"), cell.replicas == 1)
        << fmt::format("{}", fmt::join(cell.flags, "; "));
    if (cell.replicas == 2 && cell.scaling_efficiency > 1) {
      ++above_one;
      EXPECT_TRUE(has(cell, "above 1: one replica's step time was timed under load"))
          << fmt::format("{}", fmt::join(cell.flags, "; "));
    }
  }
  EXPECT_EQ(above_one, 3) << "2 replicas are predicted faster than a slowed single one at every batch";
  EXPECT_TRUE(std::any_of(busy.notes.begin(), busy.notes.end(),
                          [](const auto& n) { return n.find("measured on a busy host") != n.npos; }));
  const Plan quiet = make_plan(read_calibration({write_calibration(tmp.path() / "quiet")}, loss_target()), grid);
  for (const auto& cell : quiet.cells) {
    EXPECT_FALSE(has(cell, "under load")) << cell.replicas << " x " << cell.global_batch;
    EXPECT_FALSE(has(cell, "above 1")) << cell.replicas << " x " << cell.global_batch;
  }
}

TEST(Plan, StepsComeFromTheFitWithinTheCalibratedBatchesAndFromTheNoiseScaleBeyondThem) {
  testing::TempDir tmp;
  // The steps runs log a noise scale twice B_crit, so the two estimates differ everywhere.
  for (int64_t b : {64, 256}) {
    SyntheticRun r{2, b};
    r.noise_scale = 2 * kBcrit;
    write_synthetic(tmp.path() / "cal", r);
  }
  for (int64_t b : {32, 128}) write_synthetic(tmp.path() / "cal", {1, b, 1, 1});
  const Plan p = make_plan(read_calibration({tmp.path() / "cal"}, loss_target()),
                           parse_grid({"replicas=1,2", "batch=32,64,128,256,512"}));
  ASSERT_TRUE(p.steps_fit.has_value());
  for (const auto& cell : p.cells) {
    if (cell.global_batch >= 64 && cell.global_batch <= 256) {
      EXPECT_DOUBLE_EQ(cell.steps, cell.steps_fit) << cell.global_batch;
    } else {
      EXPECT_GT(std::abs(cell.steps_noise / cell.steps_fit - 1), 0.05) << cell.global_batch;
      EXPECT_DOUBLE_EQ(cell.steps, cell.steps_noise) << cell.global_batch;
    }
  }
}

// The next calibration batch: the uncalibrated cell that could be the fastest (its interval reaches
// below the fastest's upper end) where the steps models disagree most, beyond 15%; a cell that
// cannot be the fastest, or whose batch was run to the target, is not worth it.
TEST(Plan, TheNextCalibrationGoesWhereTheModelsDisagreeOnACellThatCouldWin) {
  const auto cell = [](int64_t batch, double ttt, double low, double high, double fit, double noise) {
    CellPlan c;
    c.global_batch = batch;
    c.time_to_target_s = ttt;
    c.ttt_low_s = low;
    c.ttt_high_s = high;
    c.steps_fit = fit;
    c.steps_noise = noise;
    return c;
  };
  Plan p;
  p.cells = {cell(64, 10, 9, 11, 100, 100),        // the fastest; the models agree
             cell(128, 10.5, 9.5, 12, 100, 130),   // could win: 30% apart
             cell(256, 30, 25, 35, 100, 200),      // cannot win, however far apart
             cell(512, 10.8, 9.8, 12, 100, 150)};  // could win, 50% apart, but run to the target
  p.fastest = 0;
  p.calibrated_steps = {{64, 100}, {512, 100}};
  double gap = 0;
  EXPECT_EQ(batch_to_calibrate(p, &gap), std::optional<int64_t>(128));
  EXPECT_NEAR(gap, 0.3, 1e-12);
  p.cells[1].steps_noise = 110;  // 10%: within what the plan accepts
  EXPECT_EQ(batch_to_calibrate(p), std::nullopt);
  p.fastest.reset();
  EXPECT_EQ(batch_to_calibrate(p), std::nullopt) << "no recommendation, nothing to decide";
}

// The flags of the cell at `n` replicas and global batch `b`, joined by "; ".
std::string flags_of(const Plan& p, int n, int64_t b) {
  for (const auto& cell : p.cells)
    if (cell.replicas == n && cell.global_batch == b) return fmt::format("{}", fmt::join(cell.flags, "; "));
  return "no such cell";
}

TEST(Plan, FlagsWhereTheModelsExtrapolate) {
  testing::TempDir tmp;
  const Calibration c = read_calibration({write_calibration(tmp.path() / "cal")}, loss_target());
  const Plan p = make_plan(c, parse_grid({"replicas=2,4", "batch=64,2048"}));
  EXPECT_EQ(flags_of(p, 2, 64), "");
  EXPECT_NE(flags_of(p, 4, 64).find("communication at 4 replicas extrapolated"), std::string::npos)
      << flags_of(p, 4, 64);
  EXPECT_NE(flags_of(p, 2, 2048).find("outside the batches run to the target"), std::string::npos)
      << flags_of(p, 2, 2048);
  EXPECT_NE(flags_of(p, 2, 2048).find("x B_crit"), std::string::npos) << flags_of(p, 2, 2048);
}

// The linear rule from lr 0.1 at batch 64: steps runs at 64 (lr 0.1) and 1024 (lr 1.6).
const json kLinearRule = {{"optimizer", {{"lr", 0.1}}}, {"schedule", {{"scale_rule", "linear"}, {"base_batch", 64}}}};

fs::path write_linear_calibration(const fs::path& root) {
  for (int64_t b : {64, 1024}) write_synthetic(root, {2, b, 1, 0, "done", false, false, kLinearRule});
  for (int64_t b : {32, 128}) write_synthetic(root, {1, b, 1, 1, "done", false, false, kLinearRule});
  return root;
}

// A cell's lr by the rule is flagged outside the calibrated lrs (0.1..1.6) and more than 2x from
// the nearest of them; at exactly 2x (batch 128, lr 0.2) it is not.
TEST(Plan, FlagsAnLrFarFromTheCalibratedLrs) {
  testing::TempDir tmp;
  const Calibration c = read_calibration({write_linear_calibration(tmp.path() / "cal")}, loss_target());
  const Plan p = make_plan(c, parse_grid({"replicas=2", "batch=32,128,256,1024,2048"}));
  EXPECT_EQ(p.lr_rule, "linear");
  EXPECT_NEAR(p.calibrated_lrs.at(1024), 1.6, 1e-12);
  EXPECT_NE(flags_of(p, 2, 32).find("lr 0.05 (linear rule) outside the lrs run to the target (0.1..1.6)"),
            std::string::npos)
      << flags_of(p, 2, 32);
  EXPECT_EQ(flags_of(p, 2, 128).find("lr "), std::string::npos) << flags_of(p, 2, 128);
  EXPECT_NE(flags_of(p, 2, 256).find("lr 0.4 (linear rule) more than 2x from the nearest lr run to the target (0.1)"),
            std::string::npos)
      << flags_of(p, 2, 256);
  EXPECT_EQ(flags_of(p, 2, 1024).find("lr "), std::string::npos) << flags_of(p, 2, 1024);
  EXPECT_NE(flags_of(p, 2, 2048).find("lr 3.2 (linear rule) outside"), std::string::npos) << flags_of(p, 2, 2048);
  // The same lr at every batch (rule none): no lr flag anywhere.
  const Plan same = make_plan(read_calibration({write_calibration(tmp.path() / "none")}, loss_target()),
                              parse_grid({"replicas=2", "batch=32,2048"}));
  for (const auto& cell : same.cells) EXPECT_EQ(flags_of(same, 2, cell.global_batch).find("lr "), std::string::npos);
}

// The seed question in the plan's terms: S(2B) / S(B) from the fit (S_min 300, B_crit 200), at the
// same lr when the calibration ran one lr, and at the rule's lr (said so) when it ran the linear rule.
TEST(Plan, AnswersTheSeedQuestionFromTheFit) {
  testing::TempDir tmp;
  const Plan p = make_plan(read_calibration({write_calibration(tmp.path() / "cal")}, loss_target()),
                           parse_grid({"replicas=1,2", "batch=64,128"}));
  ASSERT_EQ(p.doubled.size(), 2u);
  const DoubledBatch& d = p.doubled.front();
  EXPECT_EQ(d.batch, 64);
  EXPECT_NEAR(d.ratio(), (128.0 + kBcrit) / (2 * (64.0 + kBcrit)), 0.03);  // 0.62: not half
  EXPECT_FALSE(d.extrapolated);                                            // 64 and 128 inside 64..256
  EXPECT_DOUBLE_EQ(d.lr, d.doubled_lr);
  const std::string md = render_plan_markdown(p);
  EXPECT_NE(md.find("predictions for 2 replicas at the same lr"), std::string::npos) << md;
  EXPECT_NE(md.find("## The seed question: 2 replicas at twice the global batch"), std::string::npos) << md;
  EXPECT_NE(md.find(fmt::format("| 64 | {:.0f} | {:.0f} | {:.2f} |", d.steps, d.doubled_steps, d.ratio())),
            std::string::npos)
      << md;
  const Plan linear = make_plan(read_calibration({write_linear_calibration(tmp.path() / "lin")}, loss_target()),
                                parse_grid({"replicas=1,2", "batch=64"}));
  const std::string lin = render_plan_markdown(linear);
  EXPECT_NE(lin.find("predicted at the rule's lr at 2B, not at the same lr"), std::string::npos) << lin;
  EXPECT_NEAR(linear.doubled.front().doubled_lr, 0.2, 1e-12);
}

// Runs that collapse or never reach the target are left out of the fit and named; a collapse also
// flags the cells at its global batch, which are never recommended.
TEST(Plan, CollapsedAndNeverReachingRunsAreLeftOutAndSaid) {
  testing::TempDir tmp;
  const fs::path root = write_calibration(tmp.path() / "cal");
  write_synthetic(root, {2, 64, 2, 0, "done", /*collapse=*/true});
  write_synthetic(root, {2, 256, 3, 0, "done", false, /*never=*/true});
  const Calibration c = read_calibration({root}, loss_target());
  const Plan p = make_plan(c, parse_grid({"replicas=1,2", "batch=64,128"}));
  const std::string notes = fmt::format("{}", fmt::join(p.notes, "\n"));
  EXPECT_NE(notes.find("seed=2: left out of the steps fit: collapsed"), std::string::npos) << notes;
  // The collapse is a finding about its global batch (its lr): every cell there says so, no other.
  for (const auto& cell : p.cells) {
    const std::string flags = fmt::format("{}", fmt::join(cell.flags, "; "));
    EXPECT_EQ(flags.find("a calibration run at this global batch collapsed to chance (2 x 64, "
                         "replicas=2,batch=64,seed=2)") != std::string::npos,
              cell.global_batch == 64)
        << cell.replicas << " x " << cell.global_batch << ": " << flags;
  }
  ASSERT_TRUE(p.fastest && p.cheapest);
  EXPECT_NE(p.cells[*p.fastest].global_batch, 64) << "never recommended";
  EXPECT_NE(p.cells[*p.cheapest].global_batch, 64) << "never recommended";
  EXPECT_NE(notes.find("seed=3: left out of the steps fit: did not reach training loss 0.5"), std::string::npos)
      << notes;
  ASSERT_TRUE(p.steps_fit.has_value());
  EXPECT_NEAR(p.steps_fit->b_crit, kBcrit, 0.03 * kBcrit);  // fitted without them
}

TEST(Plan, ACalibrationWithoutAStepsModelNamesWhatIsMissing) {
  testing::TempDir tmp;
  const fs::path root = tmp.path() / "cal";
  for (int64_t b : {32, 128}) write_synthetic(root, {1, b, 1, /*epochs=*/1});  // timing only
  write_synthetic(root, {1, 64, 2});  // one batch to the target, one replica: no noise scale
  const Calibration c = read_calibration({root}, loss_target());
  const std::string message = testing::error_of([&] { make_plan(c, parse_grid({"replicas=1", "batch=64"})); });
  EXPECT_NE(message.find("no steps model"), std::string::npos) << message;
  EXPECT_NE(message.find("1 global batch (needs 2 or more)"), std::string::npos) << message;
  EXPECT_NE(message.find("noise scale"), std::string::npos) << message;
}

TEST(Plan, GridArgumentsAreChecked) {
  EXPECT_EQ(parse_grid({"replicas=1,2", "batch=64,128"}).size(), 4u);
  EXPECT_NE(testing::error_of([] { parse_grid({"replicas=1,x", "batch=64"}); }).find("\"x\" is not a positive integer"),
            std::string::npos);
  EXPECT_NE(testing::error_of([] { parse_grid({"replicas=3", "batch=64"}); }).find("64 does not divide by replicas 3"),
            std::string::npos);
  EXPECT_NE(testing::error_of([] { parse_grid({"batch=64"}); }).find("needs both"), std::string::npos);
}

// A probe from the truth's bandwidth (latency 0.1 ms): the plan takes its constants, keeps the
// ones fitted from the step times beside them, and says which it used; probe.json round-trips.
TEST(Plan, UsesTheProbesBandwidthAndLatency) {
  testing::TempDir tmp;
  const StepTimeModel m = truth();
  std::vector<ProbePoint> points;
  for (const int64_t bytes : probe_sizes())
    points.push_back({2, static_cast<double>(bytes), ring_factor(2) * bytes * m.seconds_per_byte + 1e-4});
  const auto made = make_probe("gloo", "cpu", points);
  ASSERT_TRUE(made.has_value());
  write_probe(*made, tmp.path() / "cal");
  EXPECT_FALSE(find_probe({tmp.path()}).has_value());
  const auto probe = find_probe({tmp.path() / "cal"});
  ASSERT_TRUE(probe.has_value());
  EXPECT_NEAR(probe->bandwidth_bytes_per_s(), 2e8, 0.01 * 2e8);
  EXPECT_NEAR(probe->fit.latency_s, 1e-4, 0.01 * 1e-4);
  const Calibration c = read_calibration({write_calibration(tmp.path() / "cal")}, loss_target());
  const Plan p = make_plan(c, parse_grid({"replicas=1,2", "batch=64,256"}), probe);
  EXPECT_TRUE(p.step_time.comm_measured);
  EXPECT_EQ(p.step_time.seconds_per_byte, probe->fit.seconds_per_byte);
  EXPECT_EQ(p.step_time.latency_s, probe->fit.latency_s);
  ASSERT_TRUE(p.step_time_fitted.has_value());
  EXPECT_NEAR(1 / p.step_time_fitted->seconds_per_byte, 2e8, 0.02 * 2e8);  // fitted from the step times
  const std::string md = render_plan_markdown(p);
  EXPECT_NE(md.find("measured by the all-reduce probe"), std::string::npos) << md;
  EXPECT_NE(md.find("fitted from the step times instead: bandwidth 200 MB/s"), std::string::npos) << md;
  EXPECT_EQ(p.to_json()["step_time"]["comm_source"], "all-reduce probe");
}

// plan.html: self-contained (no script, nothing fetched), parsed by headless Chromium as the
// report's test parses report.html; it holds every cell's row and the chart with a drawn line
// per replica count and the recommended cell labelled.
TEST(PlanBrowser, PlanHtmlHoldsEveryCellAndTheChart) {
  if (testing::run_command("command -v chromium").exit_code != 0) {
    if (testing::required_by_environment("DDPLAB_REQUIRE_BROWSER"))
      FAIL() << "chromium not installed (scripts/test.sh installs it)";
    GTEST_SKIP() << "chromium not installed";
  }
  testing::TempDir tmp;
  const Plan p = make_plan(read_calibration({write_calibration(tmp.path() / "cal")}, loss_target()),
                           parse_grid({"replicas=1,2", "batch=64,128,256,512"}));
  const auto files = write_plan(p, tmp.path() / "plan");
  ASSERT_EQ(files.size(), 4u);
  const std::string html = testing::read_file(tmp.path() / "plan" / "plan.html");
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
  EXPECT_EQ(html.find("http://"), html.find("http://www.w3.org/2000/svg"));
  const auto dom = testing::run_command(
      "timeout 120 chromium --headless --no-sandbox --disable-gpu --no-first-run --disable-background-networking "
      "--disable-component-update --disable-sync --user-data-dir=" +
      tmp.str("profile") + " --dump-dom file://" + (tmp.path() / "plan" / "plan.html").string() + " 2>/dev/null");
  ASSERT_EQ(dom.exit_code, 0) << dom.output;
  for (const auto& cell : p.cells) {
    const std::string row = fmt::format("<tr><td>{}</td><td>{}</td><td>{:.0f}</td><td>{:.2f}</td>", cell.replicas,
                                        cell.global_batch, cell.per_replica_batch, 1e3 * cell.step_s);
    EXPECT_NE(dom.output.find(row), std::string::npos) << row;
  }
  const size_t chart = dom.output.find(R"(<svg xmlns="http://www.w3.org/2000/svg" id="chart-plan_ttt")");
  ASSERT_NE(chart, std::string::npos) << dom.output.substr(0, 3000);
  const std::string svg = dom.output.substr(chart, dom.output.find("</svg>", chart) - chart);
  const std::regex line("<path[^>]*class=\"line\"[^>]* d=\"M[0-9.]+,[0-9.]+ L");
  EXPECT_EQ(std::distance(std::sregex_iterator(svg.begin(), svg.end(), line), std::sregex_iterator()), 2) << svg;
  EXPECT_NE(svg.find(">fastest"), std::string::npos) << svg;
  EXPECT_NE(dom.output.find("<h2>The seed question: 2 replicas at twice the global batch</h2>"), std::string::npos);
  EXPECT_NE(testing::read_file(tmp.path() / "plan" / "plan.md").find("](plan_ttt.svg)"), std::string::npos);
}

TEST(PlanCheck, ScoresHeldOutCellsAndShowsTheHash) {
  testing::TempDir tmp;
  const Calibration c = read_calibration({write_calibration(tmp.path() / "cal")}, loss_target());
  const Plan p = make_plan(c, parse_grid({"replicas=1,2", "batch=64,128,512"}));
  write_plan(p, tmp.path() / "plan");
  for (int seed : {1, 2})
    for (int64_t b : {128, 512}) write_synthetic(tmp.path() / "held", held_out(2, b, seed));
  const CheckResult r = check_plan(tmp.path() / "plan" / "plan.json", {tmp.path() / "held"});
  EXPECT_EQ(r.plan_hash, p.hash);
  EXPECT_TRUE(r.hash_matches);
  ASSERT_EQ(r.cells.size(), 2u);
  EXPECT_EQ(r.judged, 2);
  for (const auto& cell : r.cells) {
    EXPECT_LT(std::abs(cell.step_error), 0.02);
    EXPECT_LT(std::abs(cell.steps_error), 0.03);
    EXPECT_LT(std::abs(cell.ttt_error), 0.05);
  }
  EXPECT_EQ(r.planner.within_tolerance, 2);
  EXPECT_DOUBLE_EQ(r.planner.regret, 1.0);
  const std::string md = render_check_markdown(r);
  EXPECT_NE(md.find(p.hash), std::string::npos);
}

// The seal covers all that --check reads: a prediction, a cell's calibrated flag, the creation
// time and the spec each break it when edited; the plan as written keeps it.
TEST(PlanCheck, AnEditedPlanDoesNotMatchItsSeal) {
  testing::TempDir tmp;
  const Calibration c = read_calibration({write_calibration(tmp.path() / "cal")}, loss_target());
  write_plan(make_plan(c, parse_grid({"replicas=2", "batch=128"})), tmp.path() / "plan");
  const fs::path file = tmp.path() / "plan" / "plan.json";
  const json plan = json::parse(testing::read_file(file));
  write_synthetic(tmp.path() / "held", held_out(2, 128));
  EXPECT_TRUE(check_plan(file, {tmp.path() / "held"}).hash_matches);
  const std::vector<std::pair<std::string, json>> edits = {{"/predictions/0/time_to_target_s", 1.0},
                                                           {"/cells/0/calibrated", true},
                                                           {"/cells/0/time_to_target_s", 1.0},
                                                           {"/created", "2020-01-01T00:00:00.000Z"},
                                                           {"/spec/epochs", 99}};
  for (const auto& [pointer, value] : edits) {
    json edited = plan;
    edited[json::json_pointer(pointer)] = value;
    testing::write_file(file, edited.dump(2));
    const CheckResult r = check_plan(file, {tmp.path() / "held"});
    EXPECT_TRUE(r.sealed);
    EXPECT_FALSE(r.hash_matches) << pointer;
    EXPECT_NE(render_check_markdown(r).find("edited after it was written"), std::string::npos) << pointer;
  }
}

// A plan of an older ddplab (no "spec"; its hash is FNV-1a of the predictions) is still verified,
// saying what its hash does not cover.
TEST(PlanCheck, AnOlderPlansHashCoversItsPredictionsOnly) {
  testing::TempDir tmp;
  const Calibration c = read_calibration({write_calibration(tmp.path() / "cal")}, loss_target());
  write_plan(make_plan(c, parse_grid({"replicas=2", "batch=128"})), tmp.path() / "plan");
  const fs::path file = tmp.path() / "plan" / "plan.json";
  json plan = json::parse(testing::read_file(file));
  plan.erase("spec");
  plan["hash"] = legacy_predictions_hash(plan["predictions"]);
  testing::write_file(file, plan.dump(2));
  write_synthetic(tmp.path() / "held", held_out(2, 128));
  const CheckResult r = check_plan(file, {tmp.path() / "held"});
  EXPECT_FALSE(r.sealed);
  EXPECT_TRUE(r.hash_matches);
  EXPECT_NE(render_check_markdown(r).find("covers its predictions only"), std::string::npos);
}

// Runs that started before the plan was written are not held out: refused, named, not scored.
TEST(PlanCheck, RefusesRunsThatStartedBeforeThePlan) {
  testing::TempDir tmp;
  const Calibration c = read_calibration({write_calibration(tmp.path() / "cal")}, loss_target());
  write_plan(make_plan(c, parse_grid({"replicas=1,2", "batch=128,512"})), tmp.path() / "plan");
  write_synthetic(tmp.path() / "held", {2, 512});  // dated 2026-01-01, before the plan
  write_synthetic(tmp.path() / "held", held_out(2, 128));
  const CheckResult r = check_plan(tmp.path() / "plan" / "plan.json", {tmp.path() / "held"});
  ASSERT_EQ(r.refused.size(), 1u);
  EXPECT_NE(r.refused[0].find("batch=512"), std::string::npos) << r.refused[0];
  EXPECT_NE(r.refused[0].find("before the plan was written"), std::string::npos) << r.refused[0];
  ASSERT_EQ(r.cells.size(), 1u);
  EXPECT_EQ(r.cells[0].global_batch, 128);
  EXPECT_NE(render_check_markdown(r).find("1 run refused, not scored"), std::string::npos);
}

// A held-out run may differ from the calibration in replicas, batch and seed only: another lr
// is another workload, refused with the field named; another seed and batch are scored.
TEST(PlanCheck, RefusesRunsOfAnotherSpec) {
  testing::TempDir tmp;
  const Calibration c = read_calibration({write_calibration(tmp.path() / "cal")}, loss_target());
  write_plan(make_plan(c, parse_grid({"replicas=1,2", "batch=128,512"})), tmp.path() / "plan");
  SyntheticRun other = held_out(2, 512);
  other.spec_patch = {{"optimizer", {{"lr", 0.4}}}};
  write_synthetic(tmp.path() / "held", other);
  write_synthetic(tmp.path() / "held", held_out(1, 128, 7));
  const CheckResult r = check_plan(tmp.path() / "plan" / "plan.json", {tmp.path() / "held"});
  ASSERT_EQ(r.refused.size(), 1u);
  EXPECT_NE(r.refused[0].find("/optimizer/lr: 0.01 -> 0.4"), std::string::npos) << r.refused[0];
  ASSERT_EQ(r.cells.size(), 1u);
  EXPECT_EQ(r.cells[0].replicas, 1);
}

}  // namespace
}  // namespace ddplab::plan
