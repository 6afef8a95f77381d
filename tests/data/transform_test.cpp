#include "ddplab/data/transform.h"

#include <cmath>
#include <functional>
#include <set>
#include <thread>

#include <gtest/gtest.h>
#include <torch/torch.h>

#include "ddplab/base/error.h"
#include "ddplab/data/loader.h"
#include "test_util.h"

namespace ddplab::data {
namespace {

// n images of 3x32x32 (or c x h x w): pixel (c, y, x) of image i = (i + 50c + 2y + 5x) mod 200, so
// a pixel's value tells which source pixel it came from, and channels differ.
DatasetPair patterned(int64_t n, int64_t c = 3, int64_t h = 32, int64_t w = 32) {
  DatasetPair d;
  d.name = "patterned";
  auto i = torch::arange(n, torch::kLong).view({n, 1, 1, 1});
  auto ch = torch::arange(c, torch::kLong).view({1, c, 1, 1});
  auto y = torch::arange(h, torch::kLong).view({1, 1, h, 1});
  auto x = torch::arange(w, torch::kLong).view({1, 1, 1, w});
  d.train.images = ((i + 50 * ch + 2 * y + 5 * x) % 200).to(torch::kUInt8).contiguous();
  d.train.labels = torch::arange(n, torch::kLong) % 10;
  d.test = d.train;
  d.mean = 0.4;
  d.std = 0.2;
  d.channel_mean = {0.3, 0.4, 0.5};
  d.channel_std = {0.1, 0.2, 0.25};
  d.channel_mean.resize(static_cast<size_t>(c), 0.4);
  d.channel_std.resize(static_cast<size_t>(c), 0.2);
  return d;
}

Transform make(const std::string& name, const DatasetPair& d) {
  return Transform(transform_options(config::parse_setting<config::Augment>(name, "/dataset/augment")), d);
}

// apply_one on sample `i` of `d` with the draws `a`, as a [C, H', W'] tensor.
at::Tensor one(const Transform& t, const DatasetPair& d, int64_t i, const SampleAugmentation& a) {
  auto s = t.output_size();
  auto out = torch::empty({s.channels, s.height, s.width}, torch::kFloat);
  t.apply_one(d.train.images[i].contiguous().data_ptr<uint8_t>(), a, out.data_ptr<float>());
  return out;
}

TEST(Transform, NamedRecipes) {
  EXPECT_EQ(transform_options(config::Augment::kNone).normalize, Normalize::kGlobal);
  auto s = transform_options(config::Augment::kStandard);
  EXPECT_EQ(s.pad, 4);
  EXPECT_EQ(s.crop, 0);
  EXPECT_TRUE(s.flip);
  EXPECT_EQ(s.normalize, Normalize::kChannel);
  auto tf = transform_options(config::Augment::kTfTutorial);
  EXPECT_EQ(tf.crop, 24);
  EXPECT_DOUBLE_EQ(tf.max_brightness, 63);
  EXPECT_DOUBLE_EQ(tf.min_contrast, 0.2);
  EXPECT_DOUBLE_EQ(tf.max_contrast, 1.8);
  EXPECT_EQ(tf.normalize, Normalize::kPerImage);
  EXPECT_EQ(s.name, "standard");
}

TEST(Transform, OutputSizes) {
  auto d = patterned(4);
  EXPECT_EQ(make("none", d).output_size().height, 32);
  EXPECT_EQ(make("standard", d).output_size().width, 32);
  auto tf = make("tf_tutorial", d).output_size();
  EXPECT_EQ(tf.channels, 3);
  EXPECT_EQ(tf.height, 24);
  EXPECT_EQ(tf.width, 24);
  auto b = make("tf_tutorial", d).apply(d.train.images, torch::tensor({0, 3}, torch::kLong), true, 1, 0);
  EXPECT_EQ(b.sizes(), (std::vector<int64_t>{2, 3, 24, 24}));
  EXPECT_EQ(b.scalar_type(), torch::kFloat);
  EXPECT_TRUE(b.is_contiguous());
  auto mnist = patterned(2, 1, 28, 28);
  EXPECT_EQ(make("tf_tutorial", mnist).output_size().height, 24);
}

TEST(Transform, CropLargerThanTheImageIsAnError) {
  auto small = patterned(2, 3, 16, 16);
  try {
    make("tf_tutorial", small);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("/dataset/augment"), std::string::npos) << msg;
    EXPECT_NE(msg.find("24x24"), std::string::npos) << msg;
    EXPECT_NE(msg.find("16x16"), std::string::npos) << msg;
  }
}

// How many threads `work` left running when run on a thread of its own, as the loader runs.
int64_t threads_started_on_a_thread_of_its_own(const std::function<void()>& work) {
  int64_t started = -1;
  std::thread([&] {
    const auto before = testing::process_thread_ids();
    work();
    started = testing::threads_started(before, testing::process_thread_ids());
  }).join();
  return started;
}

// Every byte value, with MNIST's statistics, training and evaluation alike: augment "none"'s
// table gives the tensor ops' values bit for bit (its batches were those ops' before the table;
// results must not move).
TEST(Transform, NoneIsTheScalarNormalization) {
  DatasetPair d = patterned(256, 1, 16, 16);
  d.train.images = (torch::arange(256 * 256, torch::kLong) % 256).to(torch::kUInt8).view({256, 1, 16, 16});
  d.mean = 0.1307;
  d.std = 0.3081;
  const auto idx = torch::randperm(256, torch::kLong);
  const auto want = d.train.images.index_select(0, idx).to(torch::kFloat).div_(255.0).sub_(d.mean).div_(d.std);
  const auto t = make("none", d);
  for (const bool train : {true, false})
    EXPECT_TRUE(torch::equal(t.apply(d.train.images, idx, train, 1, 0).view(torch::kInt32), want.view(torch::kInt32)))
        << (train ? "train" : "eval");
}

// The loader makes its batches on a thread of its own, where a parallel region would slow every
// step (transform.h says why): apply() starts no thread there.
TEST(Transform, ABatchMadeOnAThreadOfItsOwnStartsNoThread) {
  const testing::IntraOpThreads two(2);
  const auto d = patterned(64);
  const auto idx = torch::arange(64, torch::kLong);  // 196,608 values: ATen's ops would go parallel
  for (const char* name : {"none", "standard", "tf_tutorial"}) {
    const auto t = make(name, d);
    EXPECT_EQ(threads_started_on_a_thread_of_its_own([&] { t.apply(d.train.images, idx, true, 1, 0); }), 0) << name;
  }
  // The tensor ops that made augment "none"'s batches before do start one: the count sees it.
  EXPECT_GT(threads_started_on_a_thread_of_its_own(
                [&] { d.train.images.index_select(0, idx).to(torch::kFloat).div_(255.0).sub_(0.4).div_(0.2); }),
            0);
}

TEST(Transform, DrawsStayInTheirRanges) {
  auto d = patterned(1);
  auto standard = make("standard", d), tf = make("tf_tutorial", d);
  std::set<int64_t> tops, lefts;
  int flips = 0;
  double bmin = 1e9, bmax = -1e9, cmin = 1e9, cmax = -1e9;
  const int n = 4000;
  for (int i = 0; i < n; ++i) {
    auto a = tf.draw(5, 2, i);
    ASSERT_GE(a.top, 0);
    ASSERT_LE(a.top, 8);
    ASSERT_GE(a.left, 0);
    ASSERT_LE(a.left, 8);
    tops.insert(a.top);
    lefts.insert(a.left);
    flips += a.flip;
    bmin = std::min<double>(bmin, a.brightness), bmax = std::max<double>(bmax, a.brightness);
    cmin = std::min<double>(cmin, a.contrast), cmax = std::max<double>(cmax, a.contrast);
    auto s = standard.draw(5, 2, i);
    ASSERT_LE(s.top, 8);  // pad 4 on each side of 32, crop 32: offsets 0..8
    ASSERT_EQ(s.brightness, 0.0f);
    ASSERT_EQ(s.contrast, 1.0f);
  }
  EXPECT_EQ(tops.size(), 9u) << "every offset 0..8 occurs";
  EXPECT_EQ(lefts.size(), 9u);
  EXPECT_NEAR(flips / static_cast<double>(n), 0.5, 0.05);
  EXPECT_GE(bmin, -63);
  EXPECT_LE(bmax, 63);
  EXPECT_LT(bmin, -55) << "the whole range is used";
  EXPECT_GT(bmax, 55);
  EXPECT_GE(cmin, 0.2);
  EXPECT_LE(cmax, 1.8);
  EXPECT_LT(cmin, 0.3);
  EXPECT_GT(cmax, 1.7);
}

TEST(Transform, DrawsAreKeyedBySeedEpochAndIndex) {
  auto d = patterned(1);
  auto t = make("tf_tutorial", d);
  auto same = [](const SampleAugmentation& a, const SampleAugmentation& b) {
    return a.top == b.top && a.left == b.left && a.flip == b.flip && a.brightness == b.brightness &&
           a.contrast == b.contrast;
  };
  EXPECT_TRUE(same(t.draw(3, 1, 17), t.draw(3, 1, 17)));
  EXPECT_FALSE(same(t.draw(3, 1, 17), t.draw(3, 2, 17)));
  EXPECT_FALSE(same(t.draw(3, 1, 17), t.draw(4, 1, 17)));
  EXPECT_FALSE(same(t.draw(3, 1, 17), t.draw(3, 1, 18)));
  // The same (seed, epoch, index) gives the same image, whatever else is in the batch.
  auto data = patterned(40);
  auto tt = make("tf_tutorial", data);
  auto a = tt.apply(data.train.images, torch::tensor({7, 30, 2}, torch::kLong), true, 3, 1);
  auto b = tt.apply(data.train.images, torch::tensor({2, 11}, torch::kLong), true, 3, 1);
  EXPECT_TRUE(torch::equal(a[2], b[0]));
  auto c = tt.apply(data.train.images, torch::tensor({2}, torch::kLong), true, 3, 2);
  EXPECT_FALSE(torch::equal(b[0], c[0])) << "another epoch augments differently";
}

TEST(Transform, StandardCropsFromThePaddedImageAndFlips) {
  auto d = patterned(3);
  auto t = make("standard", d);
  SampleAugmentation a;
  a.top = 1;
  a.left = 6;  // source rows -3..28, columns 2..33 (pad 4)
  auto out = one(t, d, 2, a);
  auto pixel = [&](int64_t c, int64_t y, int64_t x) {
    return static_cast<float>(((2 + 50 * c + 2 * y + 5 * x) % 200 / 255.0 - d.channel_mean[c]) / d.channel_std[c]);
  };
  auto zero = [&](int64_t c) { return static_cast<float>((0 - d.channel_mean[c]) / d.channel_std[c]); };
  for (int64_t c = 0; c < 3; ++c) {
    EXPECT_FLOAT_EQ(out[c][0][0].item<float>(), zero(c)) << "row -3 is padding";
    EXPECT_FLOAT_EQ(out[c][3][0].item<float>(), pixel(c, 0, 2));
    EXPECT_FLOAT_EQ(out[c][10][29].item<float>(), pixel(c, 7, 31));
    EXPECT_FLOAT_EQ(out[c][10][30].item<float>(), zero(c)) << "column 32 is padding";
  }
  a.flip = true;  // output column x shows crop column 31 - x
  auto flipped = one(t, d, 2, a);
  EXPECT_TRUE(torch::equal(flipped, out.flip({2})));
  // Eval: the central crop of the padded image is the image itself.
  auto eval = t.apply(d.train.images, torch::tensor({2}, torch::kLong), false, 0, 0)[0];
  EXPECT_FLOAT_EQ(eval[1][5][7].item<float>(), pixel(1, 5, 7));
  EXPECT_FLOAT_EQ(eval[2][31][31].item<float>(), pixel(2, 31, 31));
}

TEST(Transform, StandardNormalizesPerChannelWithTrainingStatistics) {
  auto d = patterned(64);
  // Real statistics of the set: eval batches then have per-channel mean 0 and std 1.
  auto x = d.train.images.to(torch::kDouble) / 255.0;
  for (int64_t c = 0; c < 3; ++c) {
    d.channel_mean[c] = x.select(1, c).mean().item<double>();
    d.channel_std[c] = x.select(1, c).std(false).item<double>();
  }
  auto t = make("standard", d);
  auto out = t.apply(d.train.images, torch::arange(64, torch::kLong), false, 0, 0).to(torch::kDouble);
  for (int64_t c = 0; c < 3; ++c) {
    EXPECT_NEAR(out.select(1, c).mean().item<double>(), 0, 1e-5);
    EXPECT_NEAR(out.select(1, c).std(false).item<double>(), 1, 1e-5);
  }
}

TEST(Transform, TfTutorialCentralCropForEval) {
  auto d = patterned(2);
  auto t = make("tf_tutorial", d);
  auto a = t.eval_augmentation();
  EXPECT_EQ(a.top, 4);
  EXPECT_EQ(a.left, 4);
  EXPECT_FALSE(a.flip);
  auto out = t.apply(d.train.images, torch::tensor({1}, torch::kLong), false, 0, 0)[0].to(torch::kDouble);
  // Per-image standardization of the central 24x24 crop, computed directly.
  auto crop = d.train.images[1].slice(1, 4, 28).slice(2, 4, 28).to(torch::kDouble);
  auto want = (crop - crop.mean()) / std::max(crop.std(false).item<double>(), 1 / std::sqrt(3.0 * 24 * 24));
  EXPECT_TRUE(torch::allclose(out, want, 1e-5, 1e-5));
}

TEST(Transform, TfTutorialBrightnessContrastAndStandardization) {
  auto d = patterned(1);
  auto t = make("tf_tutorial", d);
  SampleAugmentation a;
  a.top = 2;
  a.left = 5;
  a.flip = true;
  a.brightness = 30.5f;
  a.contrast = 0.6f;
  auto out = one(t, d, 0, a).to(torch::kDouble);
  // By hand: crop, flip, + brightness, per-channel contrast around the channel mean, then
  // (x - mean) / max(std, 1/sqrt(C*H*W)) over the whole image.
  auto x = d.train.images[0].slice(1, 2, 26).slice(2, 5, 29).flip({2}).to(torch::kDouble) + 30.5;
  auto m = x.mean({1, 2}, /*keepdim=*/true);
  x = (x - m) * 0.6 + m;
  auto want = (x - x.mean()) / std::max(x.std(false).item<double>(), 1 / std::sqrt(3.0 * 24 * 24));
  EXPECT_TRUE(torch::allclose(out, want, 1e-4, 1e-4)) << (out - want).abs().max();
  // Standardized: mean 0, std 1 per image, for any draws.
  auto batch = t.apply(patterned(16).train.images, torch::arange(16, torch::kLong), true, 9, 0).to(torch::kDouble);
  for (int64_t i = 0; i < 16; ++i) {
    EXPECT_NEAR(batch[i].mean().item<double>(), 0, 1e-5);
    EXPECT_NEAR(batch[i].std(false).item<double>(), 1, 1e-4);
  }
}

TEST(Transform, PerImageStandardizationOfAConstantImageDividesByTheFloor) {
  DatasetPair d = patterned(1);
  d.train.images.fill_(77);
  auto t = make("tf_tutorial", d);
  auto out = t.apply(d.train.images, torch::tensor({0}, torch::kLong), false, 0, 0);
  EXPECT_TRUE(torch::isfinite(out).all().item<bool>());
  EXPECT_EQ(out.abs().max().item<float>(), 0.0f);
}

TEST(Transform, ReplicasSeeTheSameAugmentedSamplesAsOneReplica) {
  DatasetPair d = patterned(100);
  for (const char* name : {"standard", "tf_tutorial"}) {
    auto t = make_transform(config::parse_setting<config::Augment>(name, "/dataset/augment"), d);
    const int64_t g = 8, seed = 4, epoch = 2;
    TrainLoader single(d, t, g, 0, 1, seed);
    single.start_epoch(epoch);
    std::vector<at::Tensor> all;
    while (auto b = single.next()) all.push_back(b->x);
    for (int w : {2, 4}) {
      std::vector<std::unique_ptr<TrainLoader>> loaders;
      for (int r = 0; r < w; ++r) {
        loaders.push_back(std::make_unique<TrainLoader>(d, t, g, r, w, seed));
        loaders.back()->start_epoch(epoch);
      }
      for (size_t step = 0; step < all.size(); ++step) {
        std::vector<at::Tensor> parts;
        for (auto& l : loaders) parts.push_back(l->next()->x);
        EXPECT_TRUE(torch::equal(torch::cat(parts), all[step])) << name << " world " << w << " step " << step;
      }
    }
    // Restarting the epoch (as a resume does) repeats its augmentations exactly.
    single.start_epoch(epoch);
    EXPECT_TRUE(torch::equal(single.next()->x, all[0])) << name;
  }
}

TEST(Transform, CropLargerThanTheImagesNamesTheSpecKey) {
  const auto d = patterned(2, 3, 20, 20);
  try {
    make("tf_tutorial", d);
    FAIL() << "a 24x24 crop of 20x20 images was accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "/dataset/augment: \"tf_tutorial\" crops 24x24, larger than the 20x20 images of dataset "
                 "'patterned'");
  }
}

}  // namespace
}  // namespace ddplab::data
