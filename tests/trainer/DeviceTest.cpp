// Devices as options name them: the names accepted, a GPU this process does not see refused as a
// usage error naming what is missing, what a CUDA session refuses, and the default Workload.
#include "common/Errors.h"
#include "parallel/DistOptions.h"
#include "trainer/Device.h"
#include "trainer/TrainingOptions.h"
#include "trainer/Workload.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace engram::trainer {
namespace {

TEST(DeviceTest, NamesAreCpuCudaOrCudaWithAnIndex) {
  for (const std::string name : {"cpu", "cuda", "cuda:0", "cuda:7", "cuda:123"})
    EXPECT_NO_THROW(check_device_name(name)) << name;
  for (const std::string name : {"", "gpu", "CUDA", "cuda:", "cuda:x", "cuda:-1", "cuda:1234",
                                 "cuda0", " cuda", "cpu:0", "mps"}) {
    try {
      check_device_name(name);
      ADD_FAILURE() << "accepted '" << name << "'";
    } catch (const InvalidOption& e) {
      EXPECT_EQ(e.option(), "device");
      EXPECT_NE(std::string(e.what()).find("cpu, cuda or cuda:N"), std::string::npos) << e.what();
    }
  }
  EXPECT_EQ(resolve_device("cpu"), c10::Device(c10::kCPU));
}

TEST(DeviceTest, CudaWithoutAVisibleGpuIsAUsageErrorNamingWhatIsMissing) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is visible: nothing is missing";
  for (const std::string name : {"cuda", "cuda:0", "cuda:3"}) {
    try {
      resolve_device(name);
      ADD_FAILURE() << name << " resolved without a GPU";
    } catch (const InvalidOption& e) {
      EXPECT_EQ(e.option(), "device");
      EXPECT_NE(std::string(e.what()).find("no CUDA device is visible"), std::string::npos)
          << e.what();
    }
  }
  TrainingOptions options;
  options.device = "cuda";
  EXPECT_THROW(check_device_support(options), InvalidOption);
}

TEST(DeviceTest, AnIndexBeyondTheVisibleGpusIsAUsageError) {
  const int count = cuda_device_count();
  if (count == 0) GTEST_SKIP() << "no CUDA device: the index check needs one";
  try {
    resolve_device("cuda:" + std::to_string(count));
    ADD_FAILURE() << "an index past the devices resolved";
  } catch (const InvalidOption& e) {
    EXPECT_NE(std::string(e.what()).find("sees " + std::to_string(count)), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(resolve_device("cuda").index(), 0);
}

TEST(DeviceTest, ACudaSessionRefusesWhatRunsOnTheCpuOnly) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "no CUDA device: the checks come after it";
  TrainingOptions options;
  options.device = "cuda";
  EXPECT_NO_THROW(check_device_support(options));
  options.memory.techniques = {"relu"};  // compressed on the device
  EXPECT_NO_THROW(check_device_support(options));
  options.memory.techniques = {"relu", "recompute"};  // every unit rerun on the device
  EXPECT_NO_THROW(check_device_support(options));
  options.memory.budget_bytes = 1 << 20;  // planned on the device's measured peaks
  EXPECT_NO_THROW(check_device_support(options));
  options.memory.budget_bytes = 0;
  options.memory.cap = "0.5";
  EXPECT_NO_THROW(check_device_support(options));
  options.memory.cap.clear();
  options.memory.techniques = {"swap"};  // to pinned host memory
  EXPECT_NO_THROW(check_device_support(options));
  options.memory.techniques = {"reuse"};  // from a device arena
  EXPECT_NO_THROW(check_device_support(options));
  options.memory.techniques = {"algo"};  // cuDNN's algorithms per layer
  EXPECT_NO_THROW(check_device_support(options));
  options.memory.techniques = {};
  options.ooo_threads = 2;
  EXPECT_THROW(check_device_support(options), InvalidOption);
  options.ooo_threads = 1;
  // In a job "cuda" is the rank's own GPU: LOCAL_RANK's; one beyond the GPUs is refused.
  options.job.launched = true;
  options.job.world_size = 2;
  options.job.local_rank = 0;
  EXPECT_EQ(job_device_name(options), "cuda:0");
  options.job.local_rank = cuda_device_count();
  EXPECT_THROW(job_device_name(options), InvalidOption);
  options.device = "cuda:0";  // named: shared by the ranks
  EXPECT_EQ(job_device_name(options), "cuda:0");
}

// The checks a GPU machine runs, with the number of GPUs the process sees given: on any machine.
TEST(VisibleDevicesTest, AnIndexBeyondTheGpusSeenIsAUsageErrorNamingThem) {
  EXPECT_EQ(resolve_device_among("cuda", 1), c10::Device(c10::kCUDA, 0));
  EXPECT_EQ(resolve_device_among("cuda:1", 2), c10::Device(c10::kCUDA, 1));
  EXPECT_EQ(resolve_device_among("cpu", 0), c10::Device(c10::kCPU));
  const auto refused = [](const std::string& name, int visible, const std::string& says) {
    try {
      resolve_device_among(name, visible, "bench.device");
      ADD_FAILURE() << name << " resolved among " << visible;
    } catch (const InvalidOption& e) {
      EXPECT_EQ(e.option(), "bench.device");
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refused("cuda:1", 1, "sees 1 CUDA device (cuda:0)");
  refused("cuda:4", 4, "sees 4 CUDA devices (cuda:0 to cuda:3)");
  refused("cuda", 0, "no CUDA device is visible");
  refused("gpu", 2, "cpu, cuda or cuda:N");
}

TEST(VisibleDevicesTest, ACudaSessionTakesTheDeviceTechniquesAndRefusesTheCpusOnly) {
  TrainingOptions options;
  options.device = "cuda";
  for (const std::vector<std::string> techniques :
       {std::vector<std::string>{}, {"relu"}, {"recompute"}, {"swap"}, {"reuse"}, {"algo"},
        {"relu", "recompute", "swap"}}) {
    options.memory.techniques = techniques;
    EXPECT_NO_THROW(check_device_support(options, 1)) << techniques.size();
  }
  options.memory.techniques = {"relu"};
  options.memory.cap = "0.5";  // a device's memory: allowed here, refused on the CPU below
  EXPECT_NO_THROW(check_device_support(options, 1));
  options.ooo_threads = 2;
  try {
    check_device_support(options, 1);
    ADD_FAILURE() << "a second weight-gradient thread was taken on cuda";
  } catch (const InvalidOption& e) {
    EXPECT_EQ(e.option(), "ooo_threads");
  }
  options.ooo_threads = 1;
  options.device = "cuda:1";
  EXPECT_THROW(check_device_support(options, 1), InvalidOption);  // one GPU seen: cuda:0 only
  options.device = "cpu";
  try {
    check_device_support(options, 1);
    ADD_FAILURE() << "a device-memory cap was taken on the CPU";
  } catch (const InvalidOption& e) {
    EXPECT_EQ(e.option(), "memory.cap");
  }
}

TEST(VisibleDevicesTest, InAJobCudaIsTheRanksOwnGpuAndOneBeyondThemIsRefused) {
  TrainingOptions options;
  options.device = "cuda";
  EXPECT_EQ(job_device_name(options, 2), "cuda");  // no job: the first GPU
  options.job.launched = true;
  options.job.world_size = 4;
  options.job.local_rank = 1;
  options.job.local_rank_given = true;
  EXPECT_EQ(job_device_name(options, 2), "cuda:1");
  EXPECT_NO_THROW(check_device_support(options, 2));
  try {
    job_device_name(options, 1);
    ADD_FAILURE() << "LOCAL_RANK 1 took a GPU among 1";
  } catch (const InvalidOption& e) {
    EXPECT_EQ(e.option(), "device");
    EXPECT_NE(std::string(e.what()).find("LOCAL_RANK 1 sees 1 CUDA device"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(check_device_support(options, 1), InvalidOption);
  options.device = "cuda:0";  // named: shared by the ranks
  EXPECT_EQ(job_device_name(options, 1), "cuda:0");
}

TEST(VisibleDevicesTest, RanksStartedWithoutLocalRankEachTakeTheGpuOfTheirRank) {
  // Started by hand on one host, with RANK and WORLD_SIZE only: every rank counts as on this
  // host, so each takes a GPU of its own, never all the first one (where NCCL fails).
  TrainingOptions options;
  options.device = "cuda";
  for (int rank : {0, 1}) {
    const std::map<std::string, std::string> vars{{"RANK", std::to_string(rank)},
                                                  {"WORLD_SIZE", "2"}};
    options.job = parallel::env_from([&](const char* name) -> const char* {
      const auto it = vars.find(name);
      return it == vars.end() ? nullptr : it->second.c_str();
    });
    EXPECT_EQ(job_device_name(options, 2), "cuda:" + std::to_string(rank));
  }
  try {  // rank 1 with one GPU: refused, saying where its LOCAL_RANK came from
    job_device_name(options, 1);
    ADD_FAILURE() << "rank 1 took a GPU among 1";
  } catch (const InvalidOption& e) {
    EXPECT_NE(std::string(e.what()).find("LOCAL_RANK 1 (its RANK: without LOCAL_RANK and "
                                         "LOCAL_WORLD_SIZE every rank counts as on this host) "
                                         "sees 1 CUDA device"),
              std::string::npos)
        << e.what();
  }
}

TEST(DeviceTest, CpuOptionsNeedNoGpuAndValidateRefusesABadName) {
  TrainingOptions options;
  EXPECT_NO_THROW(check_device_support(options));
  options.job.launched = true;  // a job's ranks on the CPU stay there
  EXPECT_EQ(job_device_name(options), "cpu");
  EXPECT_EQ(job_dist_options(options).backend, "gloo");
  // Ranks sharing one named GPU sum over Gloo; NCCL, which needs a GPU per rank, is refused.
  options.device = "cuda:0";
  options.job.world_size = 2;
  EXPECT_EQ(job_dist_options(options).backend, "gloo");
  options.dist.backend = "nccl";
  try {  // a job launched without LOCAL_WORLD_SIZE is told why its ranks count as sharing
    validate(options);
    ADD_FAILURE() << "nccl on a GPU two ranks share passed";
  } catch (const InvalidOption& e) {
    EXPECT_EQ(e.option(), "dist.backend");
    EXPECT_NE(e.problem().find("share one (cuda:0; without LOCAL_WORLD_SIZE, the ranks a host "
                               "runs, all 2 ranks count as on this host)"),
              std::string::npos)
        << e.problem();
  }
  // Ranks on hosts of their own (torchrun's LOCAL_WORLD_SIZE 1) each have their own GPU 0.
  options.job.local_world_size = 1;
  EXPECT_NO_THROW(validate(options));
  options.dist.backend = "auto";
  EXPECT_EQ(job_dist_options(options).backend, "nccl");
  options.job.local_world_size = 2;
  EXPECT_EQ(job_dist_options(options).backend, "gloo");
  options.job.local_world_size = 0;
  options.device = "cpu";
  options.job.world_size = 1;
  options.job.launched = false;
  options.memory.techniques = {"relu"};
  EXPECT_NO_THROW(check_device_support(options));
  // A cap limits a device's allocator: on the CPU it is a usage error naming the budget instead.
  options.memory.cap = "8GiB";
  try {
    check_device_support(options);
    ADD_FAILURE() << "a cap on the CPU passed";
  } catch (const InvalidOption& e) {
    EXPECT_EQ(e.option(), "memory.cap");
    EXPECT_NE(std::string(e.what()).find("--memory-budget"), std::string::npos) << e.what();
  }
  options.memory.cap.clear();
  options.device = "gpu";
  try {
    validate(options);
    ADD_FAILURE() << "validate accepted --device gpu";
  } catch (const InvalidOption& e) {
    EXPECT_EQ(e.option(), "device");
  }
}

/// A workload that knows nothing of devices.
class CpuOnly final : public Workload {
 public:
  std::vector<at::Tensor> parameters() override { return {}; }
  std::size_t num_examples() const override { return 1; }
  StepOutput forward(const Batch&) override { return {}; }
};

TEST(DeviceTest, AWorkloadThatCannotMoveRefusesAnyDeviceButTheCpu) {
  CpuOnly workload;
  EXPECT_NO_THROW(workload.to_device(c10::Device(c10::kCPU)));
  EXPECT_THROW(workload.to_device(c10::Device(c10::kCUDA, 0)), std::invalid_argument);
}

}  // namespace
}  // namespace engram::trainer
