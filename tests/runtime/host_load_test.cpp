#include "ddplab/runtime/host_load.h"

#include <fstream>
#include <thread>

#include <gtest/gtest.h>

namespace ddplab::runtime {
namespace {

TEST(HostLoad, ParsesThePressureAndStatFilesAsTheKernelWritesThem) {
  const std::string pressure =
      "some avg10=1.50 avg60=5.14 avg300=9.50 total=3421740945\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n";
  EXPECT_EQ(parse_pressure_some_total(pressure), 3421740945.0);
  EXPECT_FALSE(parse_pressure_some_total(""));
  EXPECT_FALSE(parse_pressure_some_total("full avg10=0.00 total=12\n")) << "only the 'some' line counts";

  const std::string stat = "cpu  2625527 98311 472312 858554 6455 0 3531 3149 0 0\ncpu0 1 2 3 4 5 6 7 8 9 10\n";
  const auto steal = parse_proc_stat_steal(stat);
  ASSERT_TRUE(steal);
  EXPECT_EQ(steal->first, 3149.0);
  EXPECT_EQ(steal->second, 2625527.0 + 98311 + 472312 + 858554 + 6455 + 0 + 3531 + 3149);
  EXPECT_FALSE(parse_proc_stat_steal("cpu0 1 2 3 4 5 6 7 8\n")) << "a per-core line is not the total";
  EXPECT_FALSE(parse_proc_stat_steal("cpu  1 2 3 4 5 6 7\n")) << "a kernel without the steal column";
}

TEST(HostLoad, AnIntervalGivesPercentOfWallTimeAndOfCpuTime) {
  HostSample a, b;
  b.at = a.at + std::chrono::seconds(2);
  a.cpu_some_us = 1e6;
  b.cpu_some_us = 1.5e6;  // 0.5 s of waiting in 2 s
  a.steal_jiffies = 10;
  a.all_jiffies = 1000;
  b.steal_jiffies = 30;
  b.all_jiffies = 1400;  // 20 of 400
  const HostLoad load = host_load_between(a, b);
  ASSERT_TRUE(load.cpu_wait_pct && load.steal_pct);
  EXPECT_DOUBLE_EQ(*load.cpu_wait_pct, 25.0);
  EXPECT_DOUBLE_EQ(*load.steal_pct, 5.0);

  b.cpu_some_us.reset();  // PSI missing at one end: unknown, never 0
  EXPECT_FALSE(host_load_between(a, b).cpu_wait_pct);
  EXPECT_FALSE(host_load_between(a, a).steal_pct) << "an empty interval";
}

// On this Linux host: /proc/stat always has the steal column; a busy thread beside a sleeping
// one never makes the counters go backwards.
TEST(HostLoad, TheRealCountersOfThisHostAreReadAndMonotone) {
  const HostSample a = sample_host();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const HostSample b = sample_host();
  ASSERT_TRUE(a.steal_jiffies && b.all_jiffies);
  const HostLoad load = host_load_between(a, b);
  ASSERT_TRUE(load.steal_pct);
  EXPECT_GE(*load.steal_pct, 0.0);
  EXPECT_LE(*load.steal_pct, 100.0);
  if (std::ifstream("/proc/pressure/cpu")) {
    ASSERT_TRUE(load.cpu_wait_pct);
    EXPECT_GE(*load.cpu_wait_pct, 0.0);
  } else {
    EXPECT_FALSE(load.cpu_wait_pct) << "no PSI on this kernel: unknown";
  }
}

}  // namespace
}  // namespace ddplab::runtime
