// Tests of the trainer module: checkpoints and the training loop. One file because every test
// here needs torch headers, which are slow to compile.
#include "common/Errors.h"
#include "memory/ActivationStore.h"
#include "nn/Linear.h"
#include "tests/support/TempDir.h"
#include "tests/support/Thrown.h"
#include "trainer/BackwardProfile.h"
#include "trainer/BatchSampler.h"
#include "trainer/Checkpoint.h"
#include "trainer/DataParallel.h"
#include "trainer/FusedAdam.h"
#include "trainer/FusedSgd.h"
#include "trainer/MemoryTechnique.h"
#include "trainer/MemoryTechniques.h"
#include "trainer/Optimizer.h"
#include "trainer/Stepper.h"
#include "trainer/Trainer.h"
#include "trainer/TrainingOptions.h"
#include "trainer/TrainingState.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <torch/serialize.h>
#include <torch/torch.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace engram::trainer {
namespace {

using testing::read_file;
using testing::split_lines;
using testing::TempDir;
using testing::write_file;

class TorchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    torch::set_num_threads(1);
    torch::manual_seed(0);
  }
  TempDir dir_;
};

// ---------------------------------------------------------------------------------------------
// FusedAdam and FusedSgd

/// Ten steps of our optimizer and torch's on copies of three parameters, the last with a gradient
/// on even steps only (skipped on the others): equal to float rounding after every step (torch's
/// vectorized kernels fuse some products and sums into one FMA where the CPU has it; the fused
/// loops round twice). Returns our parameters, their gradients reset by a final zero_grad().
std::vector<torch::Tensor> expect_matches_torch(
    const std::function<std::unique_ptr<Optimizer>(std::vector<torch::Tensor>)>& make_ours,
    const std::function<std::unique_ptr<torch::optim::Optimizer>(std::vector<torch::Tensor>)>&
        make_reference) {
  std::vector<torch::Tensor> ours{torch::randn({64, 33}), torch::randn({257}),
                                  torch::randn({5, 3})};
  std::vector<torch::Tensor> theirs;
  for (auto& p : ours) {
    p.set_requires_grad(true);
    theirs.push_back(p.detach().clone().set_requires_grad(true));
  }
  const auto fused = make_ours(ours);
  const auto reference = make_reference(theirs);
  for (int step = 0; step < 10; ++step) {
    fused->zero_grad();
    reference->zero_grad();
    for (std::size_t k = 0; k < ours.size(); ++k) {
      if (k == 2 && step % 2 == 1) {
        theirs[k].mutable_grad() = torch::Tensor();
        continue;
      }
      const auto g = torch::randn(ours[k].sizes()) * (step + 1);
      ours[k].mutable_grad() = g.clone();
      theirs[k].mutable_grad() = g.clone();
    }
    fused->step();
    reference->step();
    for (std::size_t k = 0; k < ours.size(); ++k) {
      SCOPED_TRACE("step " + std::to_string(step) + ", parameter " + std::to_string(k));
      EXPECT_TRUE(torch::allclose(ours[k], theirs[k], 1e-6, 1e-6));
    }
  }
  fused->zero_grad();
  return ours;
}

TEST_F(TorchTest, FusedAdamMatchesTorchAdamOverTenSteps) {
  const auto ours = expect_matches_torch(
      [](std::vector<torch::Tensor> p) { return std::make_unique<FusedAdam>(p, 3e-3); },
      [](std::vector<torch::Tensor> p) {
        return std::make_unique<torch::optim::Adam>(p, torch::optim::AdamOptions(3e-3));
      });
  for (const auto& p : ours) EXPECT_FALSE(p.grad().defined());
  EXPECT_THROW(FusedAdam({torch::zeros({2}, torch::kDouble)}, 1e-3), std::invalid_argument);
}

TEST_F(TorchTest, FusedAdamUpdatesASubsetAsStepWould) {
  // Out-of-order backprop updates some parameters later, one group at a time: the same bytes.
  std::vector<torch::Tensor> all{torch::randn({7, 3}), torch::randn({5}), torch::randn({4})};
  std::vector<torch::Tensor> split;
  for (const auto& p : all) split.push_back(p.clone());
  FusedAdam together(all, 1e-2), apart(split, 1e-2);
  for (int step = 0; step < 3; ++step) {
    for (std::size_t k = 0; k < all.size(); ++k) {
      const auto g = torch::randn(all[k].sizes());
      all[k].mutable_grad() = g.clone();
      split[k].mutable_grad() = g.clone();
    }
    together.step();
    apart.step({2});
    apart.step({0, 1});
  }
  for (std::size_t k = 0; k < all.size(); ++k) EXPECT_TRUE(torch::equal(all[k], split[k])) << k;
  EXPECT_THROW(apart.step({3}), std::out_of_range);
}

TEST_F(TorchTest, FusedSgdMatchesTorchSgdOverTenSteps) {
  for (const double momentum : {0.9, 0.0}) {
    SCOPED_TRACE("momentum " + std::to_string(momentum));
    const auto ours = expect_matches_torch(
        [&](std::vector<torch::Tensor> p) { return std::make_unique<FusedSgd>(p, 0.05, momentum); },
        [&](std::vector<torch::Tensor> p) {
          return std::make_unique<torch::optim::SGD>(
              p, torch::optim::SGDOptions(0.05).momentum(momentum));
        });
    for (const auto& p : ours) EXPECT_FALSE(p.grad().defined());
  }
  EXPECT_THROW(FusedSgd({torch::zeros({2}, torch::kDouble)}, 0.1), std::invalid_argument);
  EXPECT_THROW(FusedSgd({torch::zeros({2})}, 0.1, 1.0), std::invalid_argument);
}

TEST_F(TorchTest, FusedSgdUpdatesASubsetAsStepWouldAndKeepsItsStateInACheckpoint) {
  std::vector<torch::Tensor> all{torch::randn({7, 3}), torch::randn({5})};
  std::vector<torch::Tensor> split;
  for (const auto& p : all) split.push_back(p.clone());
  FusedSgd together(all, 0.1, 0.9), apart(split, 0.1, 0.9);
  const auto grads = [&] {
    for (std::size_t k = 0; k < all.size(); ++k) {
      const auto g = torch::randn(all[k].sizes());
      all[k].mutable_grad() = g.clone();
      split[k].mutable_grad() = g.clone();
    }
  };
  for (int step = 0; step < 3; ++step) {
    grads();
    together.step();
    apart.step({1});
    apart.step({0});
  }
  for (std::size_t k = 0; k < all.size(); ++k) EXPECT_TRUE(torch::equal(all[k], split[k])) << k;
  EXPECT_THROW(apart.step({2}), std::out_of_range);

  // The momentum buffers go through a checkpoint's named tensors: a copy continues the same.
  const auto named = together.state_tensors();
  ASSERT_EQ(named.size(), 2u);
  EXPECT_EQ(named[0].first, "sgd.0.momentum");
  std::map<std::string, torch::Tensor> saved;
  for (const auto& [name, t] : named) saved[name] = t.clone();
  std::vector<torch::Tensor> copy;
  for (const auto& p : all) copy.push_back(p.clone());
  FusedSgd resumed(copy, 0.1, 0.9);
  resumed.load_state_tensors(saved);
  grads();
  for (std::size_t k = 0; k < all.size(); ++k) copy[k].mutable_grad() = all[k].grad().clone();
  together.step();
  resumed.step();
  for (std::size_t k = 0; k < all.size(); ++k) EXPECT_TRUE(torch::equal(all[k], copy[k])) << k;
  // Another shape, or a missing buffer, is refused and changes nothing.
  auto wrong = saved;
  wrong["sgd.1.momentum"] = torch::ones({6});
  const auto before = resumed.state_tensors()[0].second.clone();
  EXPECT_THROW(resumed.load_state_tensors(wrong), std::invalid_argument);
  EXPECT_TRUE(torch::equal(resumed.state_tensors()[0].second, before));
  EXPECT_THROW(resumed.load_state_tensors({}), std::invalid_argument);
  EXPECT_THROW(make_optimizer({"adagrad", 0.1, 0.9}, copy), std::invalid_argument);
}

// ---------------------------------------------------------------------------------------------
// Checkpoints

Checkpoint sample_checkpoint() {
  Checkpoint ck;
  ck.kind = "npi";
  ck.config_json = R"({"hidden":16,"task":"addition"})";
  ck.tensors.emplace_back("encoder.0.weight", torch::randn({4, 3}));
  ck.tensors.emplace_back("counts", torch::arange(5, torch::kLong));
  ck.tensors.emplace_back("scale", torch::tensor(2.5, torch::kDouble));
  ck.tensors.emplace_back("transposed", torch::randn({3, 5}).t());  // not contiguous
  ck.tensors.emplace_back("empty", torch::zeros({0, 3}));
  ck.tensors.emplace_back("param", torch::randn({2}).requires_grad_());
  return ck;
}

void expect_same_checkpoint(const Checkpoint& a, const Checkpoint& b) {
  EXPECT_EQ(a.kind, b.kind);
  EXPECT_EQ(a.config_json, b.config_json);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (std::size_t i = 0; i < a.tensors.size(); ++i) {
    const auto& [name_a, ta] = a.tensors[i];
    const auto& [name_b, tb] = b.tensors[i];
    EXPECT_EQ(name_a, name_b) << "tensor order is kept";
    EXPECT_EQ(ta.scalar_type(), tb.scalar_type()) << name_a;
    EXPECT_EQ(ta.sizes(), tb.sizes()) << name_a;
    EXPECT_TRUE(torch::equal(ta.detach(), tb.detach())) << name_a;
  }
}

/// Writes `archive` in the checkpoint layout of Checkpoint.h: a line with the format version, the
/// size and the FNV-1a checksum of the archive, then the archive.
void save_archive(const std::string& path, torch::serialize::OutputArchive& archive,
                  int version = kCheckpointFormatVersion) {
  std::ostringstream bytes;
  archive.save_to(bytes);
  const std::string data = bytes.str();
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : data) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  write_file(path, "engram-checkpoint " + std::to_string(version) + " " +
                       std::to_string(data.size()) + " " + std::to_string(h) + "\n" + data);
}

/// Saves a checkpoint whose engram header has arbitrary content.
void save_raw(const std::string& path, const nlohmann::json& header, const std::string& names) {
  torch::serialize::OutputArchive archive;
  archive.write("engram_header", c10::IValue(header.dump()));
  archive.write("engram_names", c10::IValue(names));
  save_archive(path, archive);
}

using CheckpointTest = TorchTest;

TEST_F(CheckpointTest, RoundTripGivesBackEqualTensors) {
  const Checkpoint ck = sample_checkpoint();
  const std::string path = dir_.file("model.pt");
  save_checkpoint(path, ck);
  expect_same_checkpoint(load_checkpoint(path, "npi"), ck);
  EXPECT_EQ(dir_.entries(), std::set<std::string>{"model.pt"}) << "no temporary files";
}

TEST_F(CheckpointTest, SavingOverAnExistingCheckpointReplacesIt) {
  const std::string path = dir_.file("model.pt");
  save_checkpoint(path, sample_checkpoint());
  Checkpoint other{"npi", "{}", {{"w", torch::ones({2, 2})}}};
  save_checkpoint(path, other);
  expect_same_checkpoint(load_checkpoint(path, "npi"), other);
}

TEST_F(CheckpointTest, MissingFileIsARuntimeErrorNamingIt) {
  const std::string path = dir_.file("absent.pt");
  ENGRAM_EXPECT_THROW_WITH(load_checkpoint(path, "npi"), std::runtime_error, path);
  try {
    load_checkpoint(path, "npi");
  } catch (const FormatError&) {
    ADD_FAILURE() << "a missing file is not a format error";
  } catch (const std::runtime_error&) {
  }
}

TEST_F(CheckpointTest, WrongKindIsAFormatErrorNamingBothKinds) {
  const std::string path = dir_.file("model.pt");
  save_checkpoint(path, sample_checkpoint());
  ENGRAM_EXPECT_THROW_WITH(load_checkpoint(path, "tbcnn"), FormatError, "'npi'");
  ENGRAM_EXPECT_THROW_WITH(load_checkpoint(path, "tbcnn"), FormatError, "'tbcnn'");
}

TEST_F(CheckpointTest, FlippedBytesInTheMiddleAreAFormatError) {
  Checkpoint ck{"npi", "{}", {{"big", torch::randn({64, 64})}}};  // the middle is tensor data
  const std::string path = dir_.file("model.pt");
  save_checkpoint(path, ck);
  std::string bytes = read_file(path);
  for (std::size_t i = bytes.size() / 2; i < bytes.size() / 2 + 4; ++i) bytes[i] ^= 0x5a;
  write_file(path, bytes);
  ENGRAM_EXPECT_THROW_WITH(load_checkpoint(path, "npi"), FormatError, path);
}

TEST_F(CheckpointTest, AnySingleFlippedByteIsDetectedOrHarmless) {
  // Flip every byte in turn: loading must either fail with a FormatError or give back exactly
  // what was saved (a byte of zip padding changes nothing). Never a crash, never wrong weights.
  const Checkpoint ck = sample_checkpoint();
  const std::string path = dir_.file("model.pt");
  save_checkpoint(path, ck);
  const std::string original = read_file(path);
  int detected = 0, harmless = 0;
  for (std::size_t i = 0; i < original.size(); ++i) {
    std::string bytes = original;
    bytes[i] ^= (i % 2 == 0) ? 0x01 : 0x80;
    write_file(path, bytes);
    try {
      const Checkpoint back = load_checkpoint(path, "npi");
      SCOPED_TRACE("byte " + std::to_string(i) + " flipped and not detected");
      expect_same_checkpoint(back, ck);
      ++harmless;
      if (HasFailure()) return;
    } catch (const FormatError&) {
      ++detected;
    } catch (const std::exception& e) {
      FAIL() << "byte " << i << ": not a FormatError: " << e.what();
    }
  }
  EXPECT_GT(detected, static_cast<int>(original.size()) / 2);
  RecordProperty("harmless_flips", harmless);
}

TEST_F(CheckpointTest, TruncatedOrForeignFilesAreFormatErrors) {
  const std::string path = dir_.file("model.pt");
  save_checkpoint(path, sample_checkpoint());
  const std::string bytes = read_file(path);
  write_file(path, bytes.substr(0, bytes.size() / 2));
  ENGRAM_EXPECT_THROW_WITH(load_checkpoint(path, "npi"), FormatError, path);
  write_file(path, "");
  EXPECT_THROW(load_checkpoint(path, "npi"), FormatError);
  write_file(path, "this is not a model\n");
  EXPECT_THROW(load_checkpoint(path, "npi"), FormatError);
  // A torch archive, but not one of ours: as it is, and behind a valid first line.
  torch::serialize::OutputArchive archive;
  archive.write("weight", torch::ones({2}));
  archive.save_to(path);
  ENGRAM_EXPECT_THROW_WITH(load_checkpoint(path, "npi"), FormatError, "not an engram checkpoint");
  save_archive(path, archive);
  EXPECT_THROW(load_checkpoint(path, "npi"), FormatError);
}

TEST_F(CheckpointTest, TheFirstLineIsCheckedBeforeTorchReadsTheArchive) {
  const std::string path = dir_.file("model.pt");
  save_checkpoint(path, sample_checkpoint());
  const std::string bytes = read_file(path);
  const auto newline = bytes.find('\n');
  ASSERT_NE(newline, std::string::npos);
  const auto fields = bytes.substr(0, newline);
  EXPECT_EQ(fields.rfind("engram-checkpoint " + std::to_string(kCheckpointFormatVersion) + " ", 0),
            0u)
      << fields;
  const std::string archive = bytes.substr(newline + 1);
  write_file(path,
             "engram-checkpoint 1 " + fields.substr(fields.find(' ', 18) + 1) + "\n" + archive);
  ENGRAM_EXPECT_THROW_WITH(load_checkpoint(path, "npi"), FormatError, "version 1");
  write_file(path, fields + "\n" + archive + "x");
  ENGRAM_EXPECT_THROW_WITH(load_checkpoint(path, "npi"), FormatError, "size or checksum");
  write_file(path, fields + "\n" + archive.substr(0, archive.size() - 1));
  ENGRAM_EXPECT_THROW_WITH(load_checkpoint(path, "npi"), FormatError, "size or checksum");
}

TEST_F(CheckpointTest, HeaderProblemsAreFormatErrors) {
  const std::string path = dir_.file("model.pt");
  const nlohmann::json good{{"format", "engram-checkpoint"},
                            {"version", kCheckpointFormatVersion},
                            {"kind", "npi"},
                            {"config", "{}"},
                            {"checksum", "0"}};
  auto with = [&](const char* key, const nlohmann::json& value) {
    nlohmann::json h = good;
    h[key] = value;
    return h;
  };
  save_raw(path, with("version", 99), "[]");
  ENGRAM_EXPECT_THROW_WITH(load_checkpoint(path, "npi"), FormatError, "version 99");
  save_raw(path, with("format", "other"), "[]");
  ENGRAM_EXPECT_THROW_WITH(load_checkpoint(path, "npi"), FormatError, "not an engram checkpoint");
  save_raw(path, good, "[]");
  ENGRAM_EXPECT_THROW_WITH(load_checkpoint(path, "npi"), FormatError, "checksum");
  save_raw(path, good, "[\"missing\"]");
  EXPECT_THROW(load_checkpoint(path, "npi"), FormatError);
  save_raw(path, good, "not json");
  EXPECT_THROW(load_checkpoint(path, "npi"), FormatError);
  // Fields of the wrong type.
  save_raw(path, with("version", "1"), "[]");
  EXPECT_THROW(load_checkpoint(path, "npi"), FormatError);
  save_raw(path, with("kind", 3), "[]");
  EXPECT_THROW(load_checkpoint(path, "npi"), FormatError);
  save_raw(path, nlohmann::json::array({1, 2}), "[]");
  EXPECT_THROW(load_checkpoint(path, "npi"), FormatError);
}

TEST_F(CheckpointTest, AFailedSaveLeavesNothingBehind) {
  const std::string path = dir_.file("no-such-dir/model.pt");
  ENGRAM_EXPECT_THROW_WITH(save_checkpoint(path, sample_checkpoint()), std::runtime_error, path);
  EXPECT_TRUE(dir_.entries().empty());
}

// ---------------------------------------------------------------------------------------------
// The training loop, on a toy workload: linear regression y = x . w* + b*.

class LinearRegression : public Workload {
 public:
  explicit LinearRegression(long n) {
    x_ = torch::randn({n, 3});
    y_ = x_.matmul(torch::tensor({1.5f, -2.0f, 0.5f})) + 0.25f;
    w_ = torch::zeros({3}, torch::requires_grad());
    b_ = torch::zeros({1}, torch::requires_grad());
  }
  std::vector<at::Tensor> parameters() override { return {w_, b_}; }
  std::size_t num_examples() const override { return static_cast<std::size_t>(x_.size(0)); }
  StepOutput forward(const Batch& b) override {
    const std::vector<std::size_t>& batch = b.indices;
    batches.push_back(batch);
    std::vector<long> idx(batch.begin(), batch.end());
    const auto rows = torch::tensor(idx, torch::kLong);
    auto error = x_.index_select(0, rows).matmul(w_) + b_ - y_.index_select(0, rows);
    if (dropout) error = error * torch::bernoulli(torch::full_like(error, 0.75));
    if (static_cast<long>(batches.size()) == signal_at_step) std::raise(signal);
    StepOutput out;
    out.loss = error.pow(2).mean() * loss_scale;
    out.metrics["abs_error"] = error.abs().mean().item<double>();
    return out;
  }
  double full_loss() {
    torch::NoGradGuard no_grad;
    return (x_.matmul(w_) + b_ - y_).pow(2).mean().item<double>();
  }

  std::vector<int> example_lengths() const override { return lengths; }

  std::vector<std::vector<std::size_t>> batches;
  std::vector<int> lengths;  ///< for a curriculum; empty: none
  double loss_scale = 1.0;
  bool dropout = false;     ///< draws from torch's generator every step
  long signal_at_step = 0;  ///< raise `signal` during this step's forward (1-based); 0: never
  int signal = SIGINT;
  torch::Tensor w_, b_;

 private:
  torch::Tensor x_, y_;
};

using TrainerTest = TorchTest;

TEST_F(TrainerTest, ReducesTheLossOfAToyRegression) {
  LinearRegression workload(64);
  const double before = workload.full_loss();
  TrainingOptions options;
  options.steps = 300;
  options.batch = 8;
  options.learning_rate = 0.05;
  const TrainSummary summary = train(workload, options);
  EXPECT_EQ(summary.steps, 300);
  EXPECT_GT(summary.seconds, 0);
  EXPECT_GT(summary.examples_per_second, 0);
  EXPECT_TRUE(std::isfinite(summary.final_loss));
  const double after = workload.full_loss();
  EXPECT_GT(before, 1.0);
  EXPECT_LT(after, 1e-3 * before) << "before " << before << ", after " << after;
  EXPECT_TRUE(torch::allclose(workload.w_.detach(), torch::tensor({1.5f, -2.0f, 0.5f}), 0, 0.05))
      << workload.w_;
}

TEST_F(TrainerTest, WritesJsonLinesMetrics) {
  LinearRegression workload(64);
  TrainingOptions options;
  options.steps = 25;
  options.log_every = 10;
  options.learning_rate = 0.05;
  options.metrics_path = dir_.file("metrics.jsonl");
  train(workload, options);
  const auto lines = split_lines(read_file(options.metrics_path));
  ASSERT_EQ(lines.size(), 3u) << "steps 10, 20 and the last one";
  std::vector<long> steps;
  double previous_seconds = 0;
  std::vector<double> losses;
  for (const auto& line : lines) {
    const auto j = nlohmann::json::parse(line);
    for (const char* key : {"step", "seconds", "loss", "abs_error"}) {
      EXPECT_TRUE(j.contains(key)) << key << " missing in " << line;
    }
    steps.push_back(j.at("step").get<long>());
    EXPECT_GE(j.at("seconds").get<double>(), previous_seconds);
    previous_seconds = j.at("seconds").get<double>();
    losses.push_back(j.at("loss").get<double>());
  }
  EXPECT_EQ(steps, (std::vector<long>{10, 20, 25}));
  EXPECT_LT(losses.back(), losses.front());
}

TEST_F(TrainerTest, BatchesCoverEveryExampleOncePerEpoch) {
  LinearRegression workload(10);
  TrainingOptions options;
  options.steps = 6;
  options.batch = 5;
  train(workload, options);
  ASSERT_EQ(workload.batches.size(), 6u);
  for (std::size_t epoch = 0; epoch < 3; ++epoch) {
    std::multiset<std::size_t> seen;
    for (std::size_t b = 2 * epoch; b < 2 * epoch + 2; ++b) {
      EXPECT_EQ(workload.batches[b].size(), 5u);
      seen.insert(workload.batches[b].begin(), workload.batches[b].end());
    }
    std::multiset<std::size_t> all;
    for (std::size_t i = 0; i < 10; ++i) all.insert(i);
    EXPECT_EQ(seen, all) << "epoch " << epoch;
  }
  EXPECT_NE(workload.batches[0], workload.batches[2]) << "reshuffled every epoch";
}

TEST_F(TrainerTest, BatchLargerThanTheDataIsClamped) {
  LinearRegression workload(4);
  TrainingOptions options;
  options.steps = 2;
  options.batch = 100;
  train(workload, options);
  ASSERT_EQ(workload.batches.size(), 2u);
  EXPECT_EQ(workload.batches[0].size(), 4u);
}

TEST_F(TrainerTest, SameSeedSameResult) {
  auto run = [](std::uint64_t seed) {
    torch::manual_seed(0);
    LinearRegression workload(32);
    TrainingOptions options;
    options.steps = 20;
    options.batch = 4;
    options.seed = seed;
    train(workload, options);
    return std::make_pair(workload.batches, workload.w_.detach().clone());
  };
  const auto a = run(1), b = run(1), c = run(2);
  EXPECT_EQ(a.first, b.first);
  EXPECT_TRUE(torch::equal(a.second, b.second));
  EXPECT_NE(a.first, c.first);
}

TEST_F(TrainerTest, OnLogCanStopTrainingEarly) {
  LinearRegression workload(16);
  TrainingOptions options;
  options.steps = 100;
  options.log_every = 10;
  options.metrics_path = dir_.file("metrics.jsonl");
  std::vector<long> calls;
  const LogCallback on_log = [&](long step, const std::map<std::string, double>& metrics) {
    calls.push_back(step);
    EXPECT_EQ(metrics.count("loss"), 1u);
    EXPECT_EQ(metrics.count("abs_error"), 1u);
    return step >= 20;
  };
  const TrainSummary summary = train(workload, options, on_log);
  EXPECT_EQ(summary.steps, 20);
  EXPECT_EQ(calls, (std::vector<long>{10, 20}));
  EXPECT_EQ(workload.batches.size(), 20u);
  EXPECT_EQ(split_lines(read_file(options.metrics_path)).size(), 2u);
}

TEST_F(TrainerTest, OnLogAddsMetricsAndItsTimeIsNotTrainingTime) {
  LinearRegression workload(16);
  TrainingOptions options;
  options.steps = 20;
  options.log_every = 10;
  options.metrics_path = dir_.file("metrics.jsonl");
  const LogCallback on_log = [&](long step, std::map<std::string, double>& metrics) {
    metrics["valid_score"] = static_cast<double>(step) / 2;
    std::this_thread::sleep_for(std::chrono::milliseconds(400));  // e.g. a validation pass
    return false;
  };
  const TrainSummary summary = train(workload, options, on_log);
  const auto lines = split_lines(read_file(options.metrics_path));
  ASSERT_EQ(lines.size(), 2u);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const auto line = nlohmann::json::parse(lines[i]);
    EXPECT_EQ(line.at("valid_score").get<double>(), 5.0 * static_cast<double>(i + 1));
    // 20 steps of a 16-example linear regression take milliseconds; the 0.8 s of callbacks
    // must not be in the clock.
    EXPECT_LT(line.at("seconds").get<double>(), 0.4);
  }
  EXPECT_LT(summary.seconds, 0.4);
}

TEST_F(TrainerTest, DivergenceIsARuntimeError) {
  LinearRegression workload(16);
  workload.loss_scale = std::numeric_limits<double>::quiet_NaN();
  TrainingOptions options;
  options.steps = 10;
  ENGRAM_EXPECT_THROW_WITH(train(workload, options), std::runtime_error, "diverged");
}

TEST_F(TrainerTest, InvalidOptionsAreRejected) {
  LinearRegression workload(16);
  TrainingOptions options;
  options.steps = -1;
  EXPECT_THROW(train(workload, options), std::invalid_argument);
  options.steps = 10;
  options.log_every = 0;
  EXPECT_THROW(train(workload, options), std::invalid_argument);
  options.log_every = 10;
  options.metrics_path = dir_.file("no-such-dir/metrics.jsonl");
  ENGRAM_EXPECT_THROW_WITH(train(workload, options), std::runtime_error, options.metrics_path);
  LinearRegression empty(0);
  options.metrics_path.clear();
  EXPECT_THROW(train(empty, options), std::runtime_error);
  EXPECT_TRUE(workload.batches.empty()) << "nothing ran";
}

// A metrics file that stops taking lines (a full disk: /dev/full) ends the run with the file
// and the reason named, instead of a log cut in half a line and a run that says it succeeded.
TEST_F(TrainerTest, AMetricsFileThatCannotBeWrittenEndsTheRun) {
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full on this machine";
  LinearRegression workload(16);
  TrainingOptions options;
  options.steps = 20;
  options.log_every = 5;
  options.metrics_path = "/dev/full";
  const std::string message = testing::message_of<std::runtime_error>([&] {
    train(workload, options);
  });
  testing::expect_says(message, "cannot write metrics file '/dev/full' at step 5");
  testing::expect_says(message, std::strerror(ENOSPC));
  EXPECT_EQ(workload.batches.size(), 5u) << "the run went on past the failed line";
}

TEST_F(TrainerTest, ZeroStepsChangesNothing) {
  LinearRegression workload(16);
  TrainingOptions options;
  options.steps = 0;
  const TrainSummary summary = train(workload, options);
  EXPECT_EQ(summary.steps, 0);
  EXPECT_TRUE(workload.batches.empty());
  EXPECT_TRUE(torch::equal(workload.w_.detach(), torch::zeros({3})));
}

// ---------------------------------------------------------------------------------------------
// The one step and the session

/// Records every phase boundary the Stepper announces, and when the workload's batch dies.
class PhaseLog final : public StepHooks {
 public:
  explicit PhaseLog(std::vector<std::string>& log) : log_(log) {}
  void before(StepPhase p) override { log_.push_back(std::string("+") + step_phase_name(p)); }
  void after(StepPhase p) override { log_.push_back(std::string("-") + step_phase_name(p)); }

 private:
  std::vector<std::string>& log_;
};

/// A LinearRegression whose batch is its own type, logging its creation and destruction.
class PreparedRegression : public LinearRegression {
 public:
  PreparedRegression(long n, std::vector<std::string>& log) : LinearRegression(n), log_(log) {}
  struct Rows : Batch {
    explicit Rows(std::vector<std::string>& log) : log(log) {}
    ~Rows() override { log.push_back("batch freed"); }
    std::vector<std::string>& log;
  };
  std::unique_ptr<Batch> make_batch(std::vector<std::size_t> indices) override {
    auto rows = std::make_unique<Rows>(log_);
    rows->indices = std::move(indices);
    log_.push_back("batch made");
    return rows;
  }
  StepOutput forward(const Batch& b) override {
    EXPECT_NE(dynamic_cast<const Rows*>(&b), nullptr) << "forward gets make_batch's batch";
    log_.push_back("forward");
    return LinearRegression::forward(b);
  }

 private:
  std::vector<std::string>& log_;
};

/// Two of nn/'s linear layers: each backward hands the scheduler one weight-gradient task.
class TwoLayers : public Workload {
 public:
  TwoLayers() {
    torch::manual_seed(4);
    x_ = torch::randn({16, 8});
  }
  std::vector<at::Tensor> parameters() override {
    std::vector<at::Tensor> p;
    for (const auto& t : first_->parameters()) p.push_back(t);
    for (const auto& t : second_->parameters()) p.push_back(t);
    return p;
  }
  std::size_t num_examples() const override { return 16; }
  StepOutput forward(const Batch& b) override {
    std::vector<long> idx(b.indices.begin(), b.indices.end());
    StepOutput out;
    out.loss = second_(torch::tanh(first_(x_.index_select(0, torch::tensor(idx))))).pow(2).mean();
    return out;
  }

 private:
  nn::Linear first_{nn::LinearOptions(8, 32)}, second_{nn::LinearOptions(32, 4)};
  torch::Tensor x_;
};

TEST_F(TrainerTest, TheBackwardProfileTimesTheChainBetweenTasksAndEachTask) {
  TwoLayers workload;
  TrainingOptions options;
  options.batch = 16;
  options.grad_clip = 0;
  TrainingSession session(workload, options);
  std::vector<std::size_t> all(16);
  std::iota(all.begin(), all.end(), 0);
  session.step(all);
  const at::Tensor before = workload.parameters().front().detach().clone();
  const BackwardProfile p = profile_backward(session, all);
  // One segment per task (one per layer), the chain before each and the task's own time, which
  // add up with the tail to the whole backward.
  ASSERT_EQ(p.segments.size(), 2u);
  double sum = p.tail_chain;
  for (const auto& s : p.segments) {
    EXPECT_GE(s.chain, 0);
    EXPECT_GT(s.weight_grad, 0);
    sum += s.chain + s.weight_grad;
  }
  EXPECT_GT(p.backward_seconds, 0);
  EXPECT_NEAR(sum, p.backward_seconds, 1e-9);
  EXPECT_GT(p.forward_seconds, 0);
  EXPECT_GT(p.step_seconds, p.forward_seconds + p.backward_seconds);
  // Each task's gradient bytes: the second layer's (32x4 + 4 floats) come first in backward.
  EXPECT_EQ(p.segments[0].bytes, (32 * 4 + 4) * sizeof(float));
  EXPECT_EQ(p.segments[1].bytes, (8 * 32 + 32) * sizeof(float));
  // A step like any other (the parameters moved), after which the session's own scheduler and
  // hooks are as they were.
  EXPECT_FALSE(torch::equal(before, workload.parameters().front()));
  std::vector<std::string> events;
  PhaseLog log(events);
  session.stepper().add_hooks(&log);
  session.step(all);  // the profile's own hooks are gone: only these hear it
  EXPECT_EQ(std::count(events.begin(), events.end(), "+backward"), 1);
  session.stepper().remove_hooks(&log);
  session.step(all);
  EXPECT_EQ(std::count(events.begin(), events.end(), "+backward"), 1);
}

TEST_F(TrainerTest, StepperRunsEveryPhaseInOrderAndFreesTheBatchAfterForward) {
  std::vector<std::string> log;
  PreparedRegression workload(8, log);
  Stepper stepper(workload, {0.05, 1.0});
  PhaseLog outer(log), inner(log);
  stepper.add_hooks(&outer);
  stepper.add_hooks(&inner);
  stepper.add_hooks(nullptr);
  const StepOutput out = stepper.step({0, 1, 2});
  EXPECT_TRUE(std::isfinite(out.loss.item<double>()));
  const std::vector<std::string> expected{
      "+batch",    "+batch",     "batch made",  "-batch",     "-batch",    "+forward",
      "+forward",  "forward",    "batch freed", "-forward",   "-forward",  "+backward",
      "+backward", "-backward",  "-backward",   "+clip",      "+clip",     "-clip",
      "-clip",     "+optimizer", "+optimizer",  "-optimizer", "-optimizer"};
  EXPECT_EQ(log, expected);
  EXPECT_EQ(workload.batches, (std::vector<std::vector<std::size_t>>{{0, 1, 2}}));
  EXPECT_FALSE(torch::equal(workload.w_.detach(), torch::zeros({3}))) << "the optimizer stepped";
}

TEST_F(TrainerTest, ClippingBoundsTheUpdateAndZeroTurnsItOff) {
  // Adam's first update is lr * sign(g) whatever the gradient's scale, so clipping shows in the
  // gradient the optimizer sees: compare it through a hook before the optimizer phase.
  class GradNorm final : public StepHooks {
   public:
    explicit GradNorm(LinearRegression& w) : w_(w) {}
    void before(StepPhase p) override {
      if (p == StepPhase::optimizer)
        norm = std::sqrt(w_.w_.grad().pow(2).sum().item<double>() +
                         w_.b_.grad().pow(2).sum().item<double>());
    }
    double norm = 0;

   private:
    LinearRegression& w_;
  };
  for (const double clip : {0.0, 0.01}) {
    torch::manual_seed(0);
    LinearRegression workload(16);
    workload.loss_scale = 100;  // a gradient far above the clip
    Stepper stepper(workload, {1e-3, clip});
    GradNorm norm(workload);
    stepper.add_hooks(&norm);
    stepper.step({0, 1, 2, 3});
    if (clip > 0) {
      EXPECT_NEAR(norm.norm, clip, 1e-6);
    } else {
      EXPECT_GT(norm.norm, 1.0);
    }
  }
}

TEST_F(TrainerTest, ASessionSteppedByHandIsTheTrainingLoop) {
  // What a benchmark does (hold a session, call step) trains exactly as trainer::train does.
  TrainingOptions options;
  options.steps = 15;
  options.batch = 4;
  options.learning_rate = 0.05;
  options.seed = 3;
  torch::manual_seed(0);
  LinearRegression trained(32);
  train(trained, options);
  torch::manual_seed(0);
  LinearRegression stepped(32);
  {
    TrainingSession session(stepped, options);
    for (long i = 0; i < options.steps; ++i) session.step();
  }
  EXPECT_EQ(stepped.batches, trained.batches);
  EXPECT_TRUE(torch::equal(stepped.w_.detach(), trained.w_.detach()));
  EXPECT_TRUE(torch::equal(stepped.b_.detach(), trained.b_.detach()));
}

TEST_F(TrainerTest, InvalidOptionsNameTheirField) {
  const auto field_of = [](const TrainingOptions& o) {
    try {
      validate(o);
    } catch (const InvalidOption& e) {
      return e.option();
    }
    return std::string("(valid)");
  };
  TrainingOptions o;
  EXPECT_EQ(field_of(o), "(valid)");
  const std::vector<std::pair<std::function<void(TrainingOptions&)>, std::string>> cases{
      {[](TrainingOptions& t) { t.steps = -1; }, "steps"},
      {[](TrainingOptions& t) { t.batch = 0; }, "batch"},
      {[](TrainingOptions& t) { t.learning_rate = 0; }, "learning_rate"},
      {[](TrainingOptions& t) { t.learning_rate = std::nan(""); }, "learning_rate"},
      {[](TrainingOptions& t) { t.grad_clip = -1; }, "grad_clip"},
      {[](TrainingOptions& t) { t.grad_clip = 1e39; }, "grad_clip"},  // beyond float32
      {[](TrainingOptions& t) { t.threads = 2000; }, "threads"},
      {[](TrainingOptions& t) { t.log_every = 0; }, "log_every"},
      {[](TrainingOptions& t) { t.memory.techniques = {"zip"}; }, "memory.techniques"},
      {[](TrainingOptions& t) { t.memory.budget_bytes = -5; }, "memory.budget_bytes"},
      {[](TrainingOptions& t) { t.memory.budget_bytes = 1000; }, "memory.budget_bytes"},
      {[](TrainingOptions& t) { t.memory.swap_bandwidth = -1; }, "memory.swap_bandwidth"},
      {[](TrainingOptions& t) { t.memory.swap_bandwidth = 1; }, "memory.swap_bandwidth"},
      {[](TrainingOptions& t) { t.checkpoint_every = 5; }, "checkpoint_path"},
      {[](TrainingOptions& t) { t.resume = true; }, "checkpoint_path"},
      {[](TrainingOptions& t) { t.curriculum = 1.5; }, "curriculum"},
      {[](TrainingOptions& t) { t.curriculum = -0.1; }, "curriculum"},
      {[](TrainingOptions& t) {
         t.checkpoint_path = "x.ckpt";
         t.checkpoint_every = -1;
       },
       "checkpoint_every"}};
  for (const auto& [spoil, field] : cases) {
    TrainingOptions bad;
    spoil(bad);
    EXPECT_EQ(field_of(bad), field);
  }
  o.memory.techniques = {"recompute"};
  o.memory.budget_bytes = 1000;
  EXPECT_EQ(field_of(o), "(valid)");
}

TEST_F(TrainerTest, DeterministicRefusesTheTimedBucketsOfOooAndHostWithThreeRanksOrMore) {
  // With 3 ranks a ring all-reduce's sums follow the buckets (measured: overlap, after, ooo k 1
  // and host chunk 1 each trained the NPI to other bits); auto chooses k and the chunks from
  // times, which differ from run to run. With 2 (a + b either way) they repeat.
  const auto field_of = [](TrainingOptions o) {
    try {
      validate(o);
    } catch (const InvalidOption& e) {
      return e.option() + ": " + e.problem();
    }
    return std::string("(valid)");
  };
  TrainingOptions o;
  o.grad_clip = 0;
  o.deterministic = true;
  o.job.launched = true;
  o.job.world_size = 3;
  o.dist.grad_sync = parallel::GradSync::ooo;
  EXPECT_EQ(field_of(o).rfind("dist.ooo_k: is auto, chosen from measured times, and with 3 or "
                              "more ranks (here 3)",
                              0),
            0u)
      << field_of(o);
  o.dist.ooo_k = 2;
  EXPECT_EQ(field_of(o), "(valid)");
  o.dist.grad_sync = parallel::GradSync::host;
  EXPECT_EQ(field_of(o).rfind("dist.chunk_layers: is auto", 0), 0u) << field_of(o);
  o.dist.chunk_layers = 1;
  EXPECT_EQ(field_of(o), "(valid)");
  o.dist.chunk_layers = -1;  // auto: with 2 ranks, or without --deterministic
  o.job.world_size = 2;
  EXPECT_EQ(field_of(o), "(valid)");
  o.job.world_size = 3;
  o.deterministic = false;
  EXPECT_EQ(field_of(o), "(valid)");
}

TEST_F(TrainerTest, RecomputeOnAModelWithoutUnitsIsAnInvalidOption) {
  LinearRegression workload(8);
  TrainingOptions options;
  options.steps = 2;
  options.memory.techniques = {"recompute"};
  try {
    train(workload, options);
    FAIL() << "expected InvalidOption";
  } catch (const InvalidOption& e) {
    EXPECT_EQ(e.option(), "memory.techniques");
    EXPECT_NE(std::string(e.what()).find("cut into units"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(workload.batches.empty()) << "nothing ran";
  options.memory.techniques = {"relu"};  // any model: its ReLUs (none here) are compressed
  EXPECT_EQ(train(workload, options).steps, 2);
}

// ---------------------------------------------------------------------------------------------
// Resumable training

/// Metrics lines without their wall-clock "seconds".
std::vector<std::string> metrics_without_seconds(const std::string& path) {
  std::vector<std::string> lines;
  for (const auto& line : split_lines(read_file(path))) {
    auto j = nlohmann::json::parse(line);
    j.erase("seconds");
    lines.push_back(j.dump());
  }
  return lines;
}

TEST_F(TrainerTest, ResumedAfterASignalEndsWithTheBytesOfAnUninterruptedRun) {
  TrainingOptions options;
  options.steps = 40;
  options.batch = 4;
  options.learning_rate = 0.05;
  options.log_every = 5;
  options.identity = "regression";
  auto fresh = [] {
    torch::manual_seed(7);  // the same data and initial weights in every run
    auto w = std::make_unique<LinearRegression>(20);
    w->dropout = true;
    return w;
  };
  auto whole = fresh();
  options.metrics_path = dir_.file("whole.jsonl");
  train(*whole, options);

  for (const int sig : {SIGINT, SIGTERM}) {
    SCOPED_TRACE(sig == SIGINT ? "SIGINT" : "SIGTERM");
    TrainingOptions part = options;
    part.metrics_path = dir_.file("part.jsonl");
    part.checkpoint_path = dir_.file("part.ckpt");
    auto first = fresh();
    first->signal_at_step = 17;  // inside a metrics window, not at a checkpoint
    first->signal = sig;
    try {
      train(*first, part);
      FAIL() << "expected Interrupted";
    } catch (const Interrupted& e) {
      EXPECT_EQ(e.signal(), sig);
      EXPECT_NE(std::string(e.what()).find("after step 17 of 40"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(part.checkpoint_path), std::string::npos) << e.what();
    }
    EXPECT_EQ(first->batches.size(), 17u) << "stops after the step the signal came in";
    EXPECT_EQ(split_lines(read_file(part.metrics_path)).size(), 3u);
    // Whatever ran in between (another session drawing numbers) does not matter: the state has
    // the generators.
    torch::rand({100});
    auto second = fresh();
    part.resume = true;
    const TrainSummary s = train(*second, part);
    EXPECT_EQ(s.steps, 40);
    EXPECT_EQ(second->batches.size(), 23u) << "the remaining steps only";
    EXPECT_TRUE(torch::equal(second->w_, whole->w_)) << second->w_ << whole->w_;
    EXPECT_TRUE(torch::equal(second->b_, whole->b_));
    std::vector<std::vector<std::size_t>> batches = first->batches;
    batches.insert(batches.end(), second->batches.begin(), second->batches.end());
    EXPECT_EQ(batches, whole->batches) << "the same data order";
    EXPECT_EQ(metrics_without_seconds(part.metrics_path),
              metrics_without_seconds(options.metrics_path));
  }
}

TEST_F(TrainerTest, CheckpointsEveryNStepsAndAResumedRunMayGoFurther) {
  torch::manual_seed(7);
  LinearRegression whole(16);
  TrainingOptions options;
  options.steps = 30;
  options.batch = 4;
  options.checkpoint_path = dir_.file("run.ckpt");
  options.checkpoint_every = 10;
  train(whole, options);
  ASSERT_TRUE(std::filesystem::exists(options.checkpoint_path));
  torch::manual_seed(7);
  LinearRegression shorter(16);
  options.steps = 20;  // its last checkpoint is at 20: resuming it for 30 is the whole run
  options.checkpoint_path = dir_.file("short.ckpt");
  train(shorter, options);
  torch::manual_seed(7);
  LinearRegression resumed(16);
  options.steps = 30;
  options.resume = true;
  EXPECT_EQ(train(resumed, options).steps, 30);
  EXPECT_EQ(resumed.batches.size(), 10u);
  EXPECT_TRUE(torch::equal(resumed.w_, whole.w_));
  // Resuming a finished run trains nothing more.
  torch::manual_seed(7);
  LinearRegression again(16);
  options.checkpoint_path = dir_.file("run.ckpt");
  EXPECT_EQ(train(again, options).steps, 30);
  EXPECT_TRUE(again.batches.empty());
  EXPECT_TRUE(torch::equal(again.w_, whole.w_));
  // Resuming it for fewer steps than it has done is a usage error, not its 30-step model.
  LinearRegression fewer(16);
  options.steps = 20;
  ENGRAM_EXPECT_THROW_WITH(train(fewer, options), InvalidOption,
                           "fewer than the 30 steps the training state");
  EXPECT_TRUE(fewer.batches.empty());
}

TEST_F(TrainerTest, ResumingWithMetricsToAPipeAppendsWithoutReadingIt) {
  // Resuming cut the metrics file back to the state's lines by reading it first: a pipe
  // (--metrics /dev/stdout | ...) was read from, waiting for ever (a regression shows as this
  // test's time limit). Its lines are appended instead.
  torch::manual_seed(7);
  LinearRegression first(16);
  TrainingOptions options;
  options.steps = 10;
  options.batch = 4;
  options.checkpoint_path = dir_.file("run.ckpt");
  options.checkpoint_every = 10;
  train(first, options);
  const std::string fifo = dir_.file("metrics.pipe");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  options.steps = 20;
  options.resume = true;
  options.metrics_path = fifo;
  options.log_every = 5;
  LinearRegression resumed(16);
  EXPECT_EQ(train(resumed, options).steps, 20);
  char buffer[4096] = {};
  const ssize_t got = ::read(reader, buffer, sizeof buffer - 1);
  ::close(reader);
  ASSERT_GT(got, 0);
  const auto lines = split_lines(std::string(buffer, static_cast<std::size_t>(got)));
  ASSERT_EQ(lines.size(), 2u);  // steps 15 and 20
  EXPECT_EQ(nlohmann::json::parse(lines[1]).at("step"), 20);
}

TEST(TrainingOptions, NoCheckpointBesideADevice) {
  // --out /dev/null made the state /dev/null.ckpt: a file in /dev, or "Permission denied" on a
  // path the user never typed.
  EXPECT_EQ(default_checkpoint_path("runs/m.pt"), "runs/m.pt.ckpt");
  EXPECT_EQ(default_checkpoint_path("/dev/null"), "");
  EXPECT_EQ(default_checkpoint_path(""), "");
}

TEST_F(TrainerTest, ACheckpointPathThatCannotBeWrittenFailsBeforeTraining) {
  // A signal may ask for the state at any step; finding out then would lose the training.
  LinearRegression model(16);
  TrainingOptions options;
  options.steps = 30;
  options.batch = 4;
  options.checkpoint_path = dir_.file("no/such/folder/run.ckpt");
  ENGRAM_EXPECT_THROW_WITH(train(model, options), std::runtime_error, "no/such/folder/run.ckpt");
  EXPECT_TRUE(model.batches.empty());
  std::filesystem::create_directory(dir_.file("run.ckpt"));
  options.checkpoint_path = dir_.file("run.ckpt");
  ENGRAM_EXPECT_THROW_WITH(train(model, options), std::runtime_error, "it is a folder");
  EXPECT_TRUE(model.batches.empty());
}

TEST_F(TrainerTest, SgdWithMomentumResumesWithTheBytesOfAnUninterruptedRun) {
  TrainingOptions options;
  options.steps = 30;
  options.batch = 4;
  options.learning_rate = 0.05;
  options.optimizer = "sgd";
  options.momentum = 0.9;
  torch::manual_seed(7);
  LinearRegression whole(16);
  train(whole, options);
  // The options reach the step: Adam, and another momentum, train other weights.
  for (const auto& [optimizer, momentum] :
       std::vector<std::pair<std::string, double>>{{"adam", 0.9}, {"sgd", 0.5}, {"sgd", 0.0}}) {
    TrainingOptions other = options;
    other.optimizer = optimizer;
    other.momentum = momentum;
    torch::manual_seed(7);
    LinearRegression w(16);
    train(w, other);
    EXPECT_FALSE(torch::equal(w.w_, whole.w_)) << optimizer << " " << momentum;
  }
  options.checkpoint_path = dir_.file("sgd.ckpt");
  options.checkpoint_every = 10;
  options.steps = 20;
  torch::manual_seed(7);
  LinearRegression first(16);
  train(first, options);
  EXPECT_FALSE(torch::equal(first.w_, whole.w_));
  options.steps = 30;
  options.resume = true;
  torch::manual_seed(7);
  LinearRegression resumed(16);
  train(resumed, options);
  EXPECT_EQ(resumed.batches.size(), 10u);
  EXPECT_TRUE(torch::equal(resumed.w_, whole.w_)) << "the momentum buffers were restored";
  // Another momentum is another run.
  options.momentum = 0.5;
  torch::manual_seed(7);
  LinearRegression other(16);
  try {
    train(other, options);
    FAIL() << "resumed with another momentum";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("optimizer is sgd (momentum 0.9), not sgd (momentum 0.5)"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(TrainerTest, ATrainingStateOfAnotherRunIsRefusedNamingWhatDiffers) {
  torch::manual_seed(7);
  LinearRegression first(16);
  TrainingOptions options;
  options.steps = 10;
  options.batch = 4;
  options.identity = "{\"hidden\": 8, \"layers\": 1}\ndata 100:abc";  // a model's JSON, its data
  options.checkpoint_path = dir_.file("run.ckpt");
  options.checkpoint_every = 10;
  train(first, options);
  const auto refused = [&](const std::function<void(TrainingOptions&)>& change) {
    TrainingOptions o = options;
    o.steps = 20;
    o.resume = true;
    change(o);
    torch::manual_seed(7);
    LinearRegression w(16);
    try {
      train(w, o);
    } catch (const FormatError& e) {
      EXPECT_TRUE(w.batches.empty());
      EXPECT_TRUE(torch::equal(w.w_, torch::zeros({3}))) << "nothing loaded";
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  EXPECT_NE(refused([](TrainingOptions& o) { o.batch = 8; }).find("batch is 4, not 8"),
            std::string::npos);
  // The model's configuration key that differs, or the data (it said only "another model or
  // data" for both).
  EXPECT_NE(refused([](TrainingOptions& o) {
              o.identity = "{\"hidden\": 16, \"layers\": 1}\ndata 100:abc";
            }).find("a run of a model whose hidden is 8, not 16"),
            std::string::npos);
  EXPECT_NE(refused([](TrainingOptions& o) {
              o.identity = "{\"hidden\": 8, \"layers\": 1}\ndata 120:def";
            }).find("a run of other data (data 100:abc, not data 120:def)"),
            std::string::npos);
  EXPECT_NE(
      refused([](TrainingOptions& o) { o.identity = "model B"; }).find("another model or data"),
      std::string::npos);
  // An option named on a later line of the identity (tbcnn's "statements N") is named as one.
  options.identity += "\nstatements 3";
  options.checkpoint_path = dir_.file("run3.ckpt");
  train(first, options);
  EXPECT_NE(refused([](TrainingOptions& o) {
              o.identity = "{\"hidden\": 8, \"layers\": 1}\ndata 100:abc\nstatements 2";
            }).find("a run whose statements is 3, not 2"),
            std::string::npos);
  options.identity = "{\"hidden\": 8, \"layers\": 1}\ndata 100:abc";
  options.checkpoint_path = dir_.file("run.ckpt");
  EXPECT_NE(refused([](TrainingOptions& o) { o.learning_rate = 0.5; }).find("learning_rate"),
            std::string::npos);
  EXPECT_NE(refused([](TrainingOptions& o) { o.seed = 2; }).find("seed is 1, not 2"),
            std::string::npos);
  EXPECT_NE(refused([](TrainingOptions& o) {
              o.optimizer = "sgd";
            }).find("optimizer is adam, not sgd (momentum 0.9)"),
            std::string::npos);
  EXPECT_EQ(refused([](TrainingOptions&) {}), "(accepted)");
  // A model checkpoint is not a training state; a missing one is a runtime error naming it.
  save_checkpoint(dir_.file("model.pt"), Checkpoint{"npi", "{}", {{"w", torch::ones({3})}}});
  EXPECT_NE(refused([&](TrainingOptions& o) {
              o.checkpoint_path = dir_.file("model.pt");
            }).find("training-state"),
            std::string::npos);
  // A state whose optimizer tensors are missing or malformed is refused by name, and the
  // generator the state carries is not left set (nothing of the session changes).
  const Checkpoint whole_state = load_checkpoint(options.checkpoint_path, "training-state");
  const auto damaged = [&](const std::function<void(Checkpoint&)>& damage) {
    Checkpoint c = whole_state;
    damage(c);
    save_checkpoint(dir_.file("damaged.ckpt"), c);
    TrainingOptions o = options;
    o.steps = 20;
    o.resume = true;
    o.checkpoint_path = dir_.file("damaged.ckpt");
    LinearRegression w(16);
    torch::manual_seed(99);
    std::string message = "(accepted)";
    try {
      train(w, o);
    } catch (const FormatError& e) {
      EXPECT_TRUE(w.batches.empty());
      message = e.what();
    }
    const at::Tensor after = torch::rand({4});
    torch::manual_seed(99);
    EXPECT_TRUE(torch::equal(after, torch::rand({4}))) << "the generator was left changed";
    return message;
  };
  const auto without = [](const std::string& name) {
    return [name](Checkpoint& c) {
      c.tensors.erase(std::remove_if(c.tensors.begin(), c.tensors.end(),
                                     [&](const auto& t) { return t.first == name; }),
                      c.tensors.end());
    };
  };
  EXPECT_NE(damaged(without("adam.steps"))
                .find("not a complete training state: it has no "
                      "adam.steps"),
            std::string::npos);
  EXPECT_NE(damaged(without("adam.1.exp_avg")).find("it has no adam.1.exp_avg"), std::string::npos);
  EXPECT_NE(damaged([](Checkpoint& c) {
              for (auto& [name, t] : c.tensors)
                if (name == "adam.steps") t = torch::zeros({}, torch::kLong);
            }).find("adam.steps is not a vector of step counts"),
            std::string::npos);
  TrainingOptions missing = options;
  missing.resume = true;
  missing.checkpoint_path = dir_.file("none.ckpt");
  LinearRegression w(16);
  try {
    train(w, missing);
    FAIL() << "expected an error";
  } catch (const FormatError&) {
    FAIL() << "a missing file is not a format error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("none.ckpt"), std::string::npos) << e.what();
  }
}

TEST(BatchSamplerCurriculum, ShortestFirstOneMoreLengthPerEqualShareThenEverything) {
  std::vector<int> lengths(12);
  for (int i = 0; i < 12; ++i) lengths[static_cast<std::size_t>(i)] = i % 4 + 1;  // 1..4
  BatchSampler sampler(12, 2, 3, Curriculum{lengths, 8});
  std::set<std::size_t> first_stage;
  for (int b = 0; b < 8; ++b) {
    const int bound = b / 2 + 1;  // 8 batches, 4 lengths: two batches per length
    for (std::size_t i : sampler.next()) {
      EXPECT_LE(lengths[i], bound) << "batch " << b;
      if (b < 2) first_stage.insert(i);
    }
  }
  EXPECT_EQ(first_stage.size(), 3u) << "a stage visits its examples as an epoch: 3 of length 1";
  std::set<int> later;
  for (int b = 0; b < 12; ++b)
    for (std::size_t i : sampler.next()) later.insert(lengths[i]);
  EXPECT_EQ(later, (std::set<int>{1, 2, 3, 4}));
  EXPECT_THROW(BatchSampler(12, 2, 3, Curriculum{{1, 2}, 8}), std::invalid_argument);
}

TEST(BatchSamplerCurriculum, RestoringAStateMidCurriculumContinuesWithTheSameBatches) {
  const std::vector<int> lengths{3, 1, 2, 1, 3, 2, 1, 3};
  // 6 curriculum batches over 3 lengths: stages change at the 3rd and 5th batch. Saved after
  // 1..5 batches (2 and 4: the last batch of a stage) and restored, the same batches follow.
  for (std::size_t at = 1; at <= 5; ++at) {
    BatchSampler a(8, 3, 5, Curriculum{lengths, 6});
    for (std::size_t i = 0; i < at; ++i) a.next();
    const BatchSampler::State saved = a.state();
    EXPECT_EQ(saved.drawn, at);
    std::vector<std::vector<std::size_t>> expected;
    for (int i = 0; i < 8; ++i) expected.push_back(a.next());  // through the stages, then all
    BatchSampler b(8, 3, 99, Curriculum{lengths, 6});
    b.restore(saved);
    for (const auto& batch : expected) EXPECT_EQ(b.next(), batch) << "saved after " << at;
  }
  BatchSampler a(8, 3, 5, Curriculum{lengths, 6});
  for (int i = 0; i < 3; ++i) a.next();  // in the second stage
  const BatchSampler::State saved = a.state();
  // A state of the first stage claimed for the second is refused: its examples are another set.
  BatchSampler c(8, 3, 5, Curriculum{lengths, 6});
  BatchSampler::State early = c.state();
  early.drawn = 4;
  EXPECT_THROW(c.restore(early), std::invalid_argument);
  // Without a curriculum the same state is of another number of examples.
  BatchSampler plain(8, 3, 5);
  EXPECT_THROW(plain.restore(saved), std::invalid_argument);
}

TEST_F(TrainerTest, ACurriculumTrainsShortExamplesFirstAndResumesMidCurriculum) {
  TrainingOptions options;
  options.steps = 24;
  options.batch = 2;
  options.curriculum = 0.5;  // 12 steps, 3 lengths: 4 steps each
  options.identity = "regression";
  auto fresh = [] {
    torch::manual_seed(7);
    auto w = std::make_unique<LinearRegression>(12);
    for (int i = 0; i < 12; ++i) w->lengths.push_back(i % 3 + 1);
    return w;
  };
  auto whole = fresh();
  train(*whole, options);
  ASSERT_EQ(whole->batches.size(), 24u);
  for (std::size_t b = 0; b < 12; ++b)
    for (std::size_t i : whole->batches[b])
      EXPECT_LE(whole->lengths[i], static_cast<int>(b / 4 + 1));
  // Interrupted inside the curriculum and resumed: the same batches and the same weights.
  TrainingOptions part = options;
  part.checkpoint_path = dir_.file("part.ckpt");
  for (const long at : {4L, 6L}) {  // the last step of a stage, and inside one
    SCOPED_TRACE("interrupted at step " + std::to_string(at));
    part.resume = false;
    auto first = fresh();
    first->signal_at_step = at;
    EXPECT_THROW(train(*first, part), Interrupted);
    auto second = fresh();
    part.resume = true;
    train(*second, part);
    std::vector<std::vector<std::size_t>> batches = first->batches;
    batches.insert(batches.end(), second->batches.begin(), second->batches.end());
    EXPECT_EQ(batches, whole->batches);
    EXPECT_TRUE(torch::equal(second->w_, whole->w_));
  }
  // Resumed without the curriculum, or with another: refused, naming it.
  for (const double other : {0.0, 0.25}) {
    TrainingOptions o = part;
    o.curriculum = other;
    auto w = fresh();
    try {
      train(*w, o);
      ADD_FAILURE() << "resumed with curriculum " << other;
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find("curriculum"), std::string::npos) << e.what();
    }
  }
  // A model whose examples have no lengths cannot have a curriculum.
  LinearRegression no_lengths(12);
  try {
    train(no_lengths, options);
    ADD_FAILURE() << "a curriculum without lengths";
  } catch (const InvalidOption& e) {
    EXPECT_EQ(e.option(), "curriculum");
  }
}

TEST_F(TrainerTest, ReuseServesLaterStepsFromTheArenaAndChangesNoWeight) {
  auto run = [](bool reuse, std::vector<double>* hit_rates) {
    torch::manual_seed(7);
    LinearRegression w(32);
    TrainingOptions options;
    options.steps = 12;
    options.batch = 8;  // 32 examples: every batch has the same shape
    if (reuse) options.memory.techniques = {"reuse"};
    TrainingSession session(w, options);
    for (int i = 0; i < options.steps; ++i) {
      const StepOutput out = session.step();
      if (hit_rates != nullptr)
        hit_rates->push_back(
            out.metrics.count("reuse_hit_rate") != 0 ? out.metrics.at("reuse_hit_rate") : -1);
    }
    return std::make_pair(w.w_.clone(), w.b_.clone());
  };
  std::vector<double> hit_rates;
  const auto with = run(true, &hit_rates);
  const auto without = run(false, nullptr);
  EXPECT_TRUE(torch::equal(with.first, without.first));
  EXPECT_TRUE(torch::equal(with.second, without.second));
  ASSERT_EQ(hit_rates.size(), 12u);
  EXPECT_EQ(hit_rates.front(), 0.0) << "the first step records";
  EXPECT_GT(hit_rates.back(), 0.5) << "steps of one shape are served from the arena";
}

TEST(BatchSamplerState, RestoringAStateContinuesWithTheSameBatches) {
  BatchSampler a(10, 3, 5);
  a.next();
  a.next();
  const BatchSampler::State saved = a.state();
  std::vector<std::vector<std::size_t>> expected;
  for (int i = 0; i < 8; ++i) expected.push_back(a.next());  // across epochs
  BatchSampler b(10, 3, 99);
  b.restore(saved);
  for (const auto& batch : expected) EXPECT_EQ(b.next(), batch);
  BatchSampler::State bad = saved;
  bad.order.pop_back();
  EXPECT_THROW(b.restore(bad), std::invalid_argument);
  bad = saved;
  bad.order[0] = bad.order[1];
  EXPECT_THROW(b.restore(bad), std::invalid_argument);
  bad = saved;
  bad.rng = "not a generator";
  EXPECT_THROW(b.restore(bad), std::invalid_argument);
  bad = saved;
  bad.cursor = 11;
  EXPECT_THROW(b.restore(bad), std::invalid_argument);
}

TEST_F(TorchTest, FusedAdamStateOfOtherShapesIsRefusedUnchanged) {
  auto p = torch::ones({2, 3});
  auto q = torch::ones({4});
  FusedAdam adam({p, q}, 0.1);
  std::vector<FusedAdam::State> state{{torch::ones({2, 3}), torch::ones({2, 3}), 4},
                                      {torch::ones({4}), torch::ones({4}), 4}};
  adam.load_state(state);
  EXPECT_EQ(adam.state()[0].steps, 4);
  EXPECT_TRUE(torch::equal(adam.state()[0].exp_avg, torch::ones({2, 3})));
  // New values in every field of both parameters, the second's exp_avg_sq of another shape: a
  // load that applied the first parameter's state before checking the second would show.
  std::vector<FusedAdam::State> refused{{torch::full({2, 3}, 5.0), torch::full({2, 3}, 6.0), 9},
                                        {torch::full({4}, 5.0), torch::full({2, 2}, 6.0), 9}};
  EXPECT_THROW(adam.load_state(refused), std::invalid_argument);
  for (std::size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(adam.state()[i].steps, 4) << "parameter " << i << " unchanged";
    EXPECT_TRUE(torch::equal(adam.state()[i].exp_avg, torch::ones_like(adam.state()[i].exp_avg)))
        << "parameter " << i;
    EXPECT_TRUE(
        torch::equal(adam.state()[i].exp_avg_sq, torch::ones_like(adam.state()[i].exp_avg_sq)))
        << "parameter " << i;
  }
  EXPECT_THROW(adam.load_state({}), std::invalid_argument);
}

// The memory techniques' one list (trainer/MemoryTechnique.h): a technique registered from
// outside the trainer is validated, chosen, installed and used like the built-in ones.
namespace technique_registry {

/// The plain store, counting what it is given.
class CountingStore : public memory::PlainStore {
 public:
  static inline int saves = 0;
  c10::intrusive_ptr<memory::SavedTensor> save(const at::Tensor& t, memory::SavedKind k) override {
    ++saves;
    return memory::PlainStore::save(t, k);
  }
  const char* name() const override { return "counting"; }
};

const MemoryTechniqueRegistration kCounting(
    {"test-counting", "every save counted", TechniqueKind::store, /*lossless=*/true,
     /*in_all=*/false, [](const MemoryOptions&) { return std::make_unique<CountingStore>(); }});

/// y = relu(x W^T) on nn/ layers, so that forward saves through the session's store.
class TinyLayers : public Workload {
 public:
  TinyLayers() : x_(torch::randn({8, 4})), w_(torch::randn({3, 4}, torch::requires_grad())) {}
  std::vector<at::Tensor> parameters() override { return {w_}; }
  std::size_t num_examples() const override { return 8; }
  StepOutput forward(const Batch&) override {
    StepOutput out;
    out.loss = nn::linear(x_, w_).pow(2).mean();
    return out;
  }

 private:
  torch::Tensor x_, w_;
};

}  // namespace technique_registry

TEST(MemoryTechniqueRegistry, ListsTheBuiltInTechniquesThenRegisteredOnes) {
  std::vector<std::string> names;
  for (const auto& t : memory_techniques()) names.push_back(t.name);
  ASSERT_GE(names.size(), 6u);
  EXPECT_EQ(std::vector<std::string>(names.begin(), names.begin() + 5),
            (std::vector<std::string>{"relu", "recompute", "swap", "reuse", "algo"}));
  EXPECT_NE(std::find(names.begin(), names.end(), "test-counting"), names.end());
  const std::vector<std::string> accepted = memory_technique_names();
  EXPECT_EQ(
      std::vector<std::string>(accepted.begin(), accepted.begin() + 7),
      (std::vector<std::string>{"none", "relu", "recompute", "swap", "all", "reuse", "algo"}));
  const std::string help = memory_techniques_help();
  for (const auto& n : names) EXPECT_NE(help.find(n + " ("), std::string::npos) << n;
  EXPECT_NE(help.find("algo (lossy: "), std::string::npos) << help;
  EXPECT_NE(help.find("all (relu, recompute, swap)"), std::string::npos) << help;
}

TEST(MemoryTechniqueRegistry, RefusesATakenOrMalformedNameAndAStoreWithoutFactory) {
  const auto store = [](const MemoryOptions&) -> std::unique_ptr<memory::ActivationStore> {
    return std::make_unique<memory::PlainStore>();
  };
  for (const char* name : {"relu", "none", "all", "test-counting", "", "Has Space", "a+b"}) {
    EXPECT_THROW(register_memory_technique({name, "x", TechniqueKind::store, true, false, store}),
                 std::invalid_argument)
        << name;
  }
  EXPECT_THROW(register_memory_technique({"test-no-factory", "x", TechniqueKind::store}),
               std::invalid_argument);
  EXPECT_THROW(
      register_memory_technique({"test-units", "x", TechniqueKind::units, true, false, store}),
      std::invalid_argument);
  EXPECT_EQ(find_memory_technique("test-no-factory"), nullptr);
}

// A job held across sessions is joined with determinism already on: ProcessGroupNCCL leaves out
// NCCL's nondeterministic algorithms (NVLS) only when deterministic algorithms are on at its
// making. (Each test runs in a process of its own: nothing turned it on before.)
TEST(JobScopeTest, DeterminismIsOnBeforeTheJobIsJoined) {
  ASSERT_FALSE(at::globalContext().deterministicAlgorithms());
  TrainingOptions options;
  options.deterministic = true;
  const JobScope job(options);  // a process of its own: no job to join
  EXPECT_TRUE(at::globalContext().deterministicAlgorithms());
  EXPECT_TRUE(at::globalContext().deterministicCuDNN());
  // Without filling every new tensor first (torch's default under deterministic algorithms):
  // the technique rows' buffers are written whole, and a fill per buffer would slow their steps
  // against none's and the PyTorch peer's.
  EXPECT_FALSE(at::globalContext().deterministicFillUninitializedMemory());
}

TEST(MemoryTechniqueRegistry, ChoiceReadsKindsAndLosslessnessFromTheList) {
  const TechniqueChoice all({"all"});
  EXPECT_EQ(all.name(), "relu+recompute+swap");
  EXPECT_TRUE(all.uses_units() && all.plans() && all.lossless() && !all.reuse());
  EXPECT_EQ(all.store()->name, "relu");
  const TechniqueChoice mine({"reuse", "test-counting", "test-counting", "bogus"});
  EXPECT_EQ(mine.chosen().size(), 2u);
  EXPECT_EQ(mine.store()->name, "test-counting");
  EXPECT_TRUE(mine.reuse() && !mine.plans());
  EXPECT_FALSE(TechniqueChoice({"algo"}).lossless());
  EXPECT_EQ(TechniqueChoice({"none"}).name(), "none");
  EXPECT_EQ(TechniqueChoice({}).store(), nullptr);
}

TEST(MemoryTechniqueRegistry, TwoStoresAreRefusedNamingBoth) {
  MemoryOptions o;
  o.techniques = {"relu", "test-counting"};
  try {
    validate(o);
    FAIL() << "relu with a second store validated";
  } catch (const InvalidOption& e) {
    EXPECT_EQ(e.option(), "memory.techniques");
    EXPECT_NE(std::string(e.what()).find("relu and test-counting"), std::string::npos) << e.what();
  }
  o.techniques = {"test-counting", "swap", "recompute"};
  EXPECT_NO_THROW(validate(o));
}

TEST(MemoryTechniqueRegistry, ARegisteredStoreIsTheOneTheSessionsLayersSaveThrough) {
  technique_registry::TinyLayers workload;
  TrainingOptions o;
  o.steps = 2;
  o.batch = 8;
  o.memory.techniques = {"test-counting"};
  technique_registry::CountingStore::saves = 0;
  {
    TrainingSession session(workload, o);
    ASSERT_NE(session.memory().store(), nullptr);
    EXPECT_STREQ(session.memory().store()->name(), "counting");
    EXPECT_EQ(session.memory().name(), "test-counting");
    session.step();
  }
  EXPECT_GT(technique_registry::CountingStore::saves, 0);
  // Under swap the swap store wraps it.
  o.memory.techniques = {"swap", "test-counting"};
  MemoryTechniques both(o.memory);
  ASSERT_NE(both.store(), nullptr);
  EXPECT_STREQ(both.store()->name(), "swap");
}

}  // namespace
}  // namespace engram::trainer
