// Tests of the npi module: model, training data, interpreter and the public API. One file because
// every test here needs torch headers, which are slow to compile.
#include "common/Errors.h"
#include "datasets/AdditionTask.h"
#include "datasets/TraceFile.h"
#include "npi/Interpreter.h"
#include "npi/Npi.h"
#include "npi/NpiData.h"
#include "npi/NpiModel.h"
#include "npi/NpiWorkload.h"
#include "tests/support/DeviceRuns.h"
#include "tests/support/TempDir.h"
#include "trainer/Trainer.h"

#include <gtest/gtest.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

namespace engram::npi {
namespace {

using datasets::AdditionTask;
using datasets::Args;
using datasets::Task;
using datasets::task_by_name;
using datasets::Trace;
using testing::TempDir;

const Task& addition() { return task_by_name("addition"); }

NpiConfig small_config(const Task& task, int hidden = 16) {
  NpiConfig config = NpiConfig::for_task(task);
  config.hidden = hidden;
  config.state_dim = hidden;
  config.program_dim = 8;
  config.key_dim = 8;
  return config;
}

class NpiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    torch::set_num_threads(1);
    torch::manual_seed(0);
  }
  TempDir dir_;
};

// ---------------------------------------------------------------------------------------------
// Model

using NpiModelTest = NpiTest;

TEST_F(NpiModelTest, ForwardPackedHasOneRowPerStep) {
  const NpiConfig config = small_config(addition());
  NpiModel model(config);
  const auto batch_sizes = torch::tensor({3, 2, 2, 1}, torch::kLong);
  const long n = 8;
  const NpiHeads out = model->forward_packed(torch::rand({n, config.feature_dim()}),
                                             torch::randint(6, {n}, torch::kLong), batch_sizes);
  EXPECT_EQ(out.end_logit.sizes(), (std::vector<int64_t>{n}));
  EXPECT_EQ(out.program_logits.sizes(), (std::vector<int64_t>{n, 6}));
  EXPECT_EQ(out.arg_logits.sizes(), (std::vector<int64_t>{n, 3, 10}));
  EXPECT_EQ(config.feature_dim(), 4 * 11 + 3 * 10);
}

TEST_F(NpiModelTest, StepAdvancesTheStateOfEveryFrame) {
  const NpiConfig config = small_config(task_by_name("sort"), 12);
  NpiModel model(config);
  const long b = 4;
  auto h = torch::zeros({config.layers, b, config.hidden});
  auto c = torch::zeros({config.layers, b, config.hidden});
  const NpiHeads out = model->step(torch::rand({b, config.feature_dim()}),
                                   torch::randint(9, {b}, torch::kLong), h, c);
  EXPECT_EQ(out.end_logit.sizes(), (std::vector<int64_t>{b}));
  EXPECT_EQ(out.program_logits.sizes(), (std::vector<int64_t>{b, 9}));
  EXPECT_EQ(out.arg_logits.sizes(), (std::vector<int64_t>{b, 3, 3}));
  EXPECT_EQ(h.sizes(), (std::vector<int64_t>{config.layers, b, config.hidden}));
  EXPECT_EQ(c.sizes(), (std::vector<int64_t>{config.layers, b, config.hidden}));
  // Every frame's state, h and c alike, moved off its zeros (one sum over all could hide a frame
  // the step left alone).
  for (const torch::Tensor& state : {h, c}) {
    const torch::Tensor per_frame = state.abs().sum(std::vector<int64_t>{0, 2});
    for (long frame = 0; frame < b; ++frame)
      EXPECT_GT(per_frame[frame].item().toDouble(), 0) << "frame " << frame << " was not advanced";
  }
}

TEST_F(NpiModelTest, StepByStepGivesTheSameHeadsAsForwardPacked) {
  // Three sequences of lengths 5, 3 and 2 in packed order (time-major, longest first).
  const NpiConfig config = small_config(addition());
  NpiModel model(config);
  model->eval();
  const std::vector<long> lengths{5, 3, 2};
  const std::vector<long> batch_sizes{3, 3, 2, 1, 1};
  const long n = 10;
  const auto features = torch::rand({n, config.feature_dim()});
  const auto programs = torch::randint(config.num_programs, {n}, torch::kLong);
  const NpiHeads packed =
      model->forward_packed(features, programs, torch::tensor(batch_sizes, torch::kLong));
  torch::NoGradGuard no_grad;
  for (long s = 0; s < 3; ++s) {
    auto h = torch::zeros({config.layers, 1, config.hidden});
    auto c = torch::zeros({config.layers, 1, config.hidden});
    long offset = 0;
    for (long t = 0; t < lengths[s]; ++t) {
      const long row = offset + s;
      offset += batch_sizes[t];
      const NpiHeads one =
          model->step(features.slice(0, row, row + 1), programs.slice(0, row, row + 1), h, c);
      SCOPED_TRACE("sequence " + std::to_string(s) + ", time " + std::to_string(t));
      EXPECT_TRUE(torch::allclose(one.end_logit, packed.end_logit.slice(0, row, row + 1), 0, 1e-5));
      EXPECT_TRUE(torch::allclose(one.program_logits, packed.program_logits.slice(0, row, row + 1),
                                  0, 1e-5));
      EXPECT_TRUE(
          torch::allclose(one.arg_logits, packed.arg_logits.slice(0, row, row + 1), 0, 1e-5));
    }
  }
}

// The model on the layers of nn/ against the same model on plain torch modules, the reference.

/// ||a - b|| / max(||b||, tiny): elementwise tolerances fail on near-zero entries of sums.
double relative_difference(const torch::Tensor& a, const torch::Tensor& b) {
  return (a - b).norm().item<double>() / std::max(b.norm().item<double>(), 1e-30);
}

NpiConfig with_layers(NpiConfig config, const std::string& layers) {
  config.layers_impl = layers;
  return config;
}

TEST_F(NpiModelTest, BothLayerImplementationsHaveTheSameParametersAndInitialWeights) {
  const NpiConfig config = small_config(addition());
  torch::manual_seed(3);
  NpiModel fused(with_layers(config, "engram"));
  torch::manual_seed(3);
  NpiModel reference(with_layers(config, "torch"));
  const auto a = fused->named_parameters();
  const auto b = reference->named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE(b[i].key());
    EXPECT_EQ(a[i].key(), b[i].key()) << "same names in the same order";
    EXPECT_TRUE(torch::equal(a[i].value(), b[i].value())) << "same random draws";
  }
  EXPECT_THROW(NpiModel(with_layers(config, "cudnn")), std::invalid_argument);
}

TEST_F(NpiModelTest,
       StepByStepMatchesForwardPackedForBothLayerImplementationsWithAndWithoutGradients) {
  const NpiConfig config = small_config(task_by_name("sort"), 12);
  // Sequences of lengths 4, 4 and 2 in packed order.
  const std::vector<long> batch_sizes{3, 3, 2, 2};
  const std::vector<long> offsets{0, 3, 6, 8};
  const long n = 10, frames = 3;
  const auto features = torch::rand({n, config.feature_dim()});
  const auto programs = torch::randint(config.num_programs, {n}, torch::kLong);
  for (const std::string core : {"engram", "torch"}) {
    torch::manual_seed(1);
    NpiModel model(with_layers(config, core));
    const NpiHeads packed =
        model->forward_packed(features, programs, torch::tensor(batch_sizes, torch::kLong));
    for (const bool grad : {false, true}) {
      torch::AutoGradMode mode(grad);
      // All frames stepped together, as the interpreter steps them; a frame whose sequence has
      // ended is fed some running row and not checked.
      auto h = torch::zeros({config.layers, frames, config.hidden});
      auto c = torch::zeros({config.layers, frames, config.hidden});
      for (long t = 0; t < static_cast<long>(batch_sizes.size()); ++t) {
        std::vector<long> rows;
        for (long s = 0; s < frames; ++s)
          rows.push_back(offsets[t] + std::min(s, batch_sizes[t] - 1));
        const auto index = torch::tensor(rows, torch::kLong);
        const NpiHeads one =
            model->step(features.index_select(0, index), programs.index_select(0, index), h, c);
        EXPECT_EQ(one.end_logit.requires_grad(), grad);
        for (long s = 0; s < batch_sizes[t]; ++s) {
          SCOPED_TRACE(core + (grad ? " with" : " without") + " gradients, time " +
                       std::to_string(t) + ", sequence " + std::to_string(s));
          const long row = rows[s];
          EXPECT_TRUE(torch::allclose(one.end_logit[s], packed.end_logit[row], 0, 1e-5));
          EXPECT_TRUE(torch::allclose(one.program_logits[s], packed.program_logits[row], 0, 1e-5));
          EXPECT_TRUE(torch::allclose(one.arg_logits[s], packed.arg_logits[row], 0, 1e-5));
        }
      }
    }
  }
}

TEST(NpiConfig, JsonRoundTrip) {
  NpiConfig config = small_config(task_by_name("sort-recursive"), 24);
  config.layers = 3;
  const NpiConfig back = NpiConfig::from_json(config.to_json());
  EXPECT_EQ(back.task, "sort-recursive");
  EXPECT_EQ(back.num_programs, 9);
  EXPECT_EQ(back.observation_sizes, (std::vector<int>{11, 11, 11}));
  EXPECT_EQ(back.arg_size, 3);
  EXPECT_EQ(back.hidden, 24);
  EXPECT_EQ(back.layers, 3);
  EXPECT_EQ(back.state_dim, 24);
  EXPECT_EQ(back.program_dim, 8);
  EXPECT_EQ(back.key_dim, 8);
  EXPECT_THROW(NpiConfig::from_json("{}"), FormatError);
  EXPECT_THROW(NpiConfig::from_json("not json"), FormatError);
  EXPECT_THROW(NpiConfig::from_json(R"({"task":1})"), FormatError);
}

// A hand-edited checkpoint with "layers":0 or "hidden":-1 printed a torch stack trace.
TEST(NpiConfig, NonPositiveSizesAreFormatErrors) {
  NpiConfig config;
  config.task = "addition";
  config.num_programs = 6;
  config.observation_sizes = {11, 11, 11, 11};
  EXPECT_NO_THROW(NpiConfig::from_json(config.to_json()));
  for (int NpiConfig::*field : {&NpiConfig::hidden, &NpiConfig::layers, &NpiConfig::state_dim,
                                &NpiConfig::key_dim, &NpiConfig::arg_size}) {
    NpiConfig bad = config;
    bad.*field = 0;
    EXPECT_THROW(NpiConfig::from_json(bad.to_json()), FormatError);
  }
  NpiConfig bad = config;
  bad.observation_sizes = {11, -1};
  EXPECT_THROW(NpiConfig::from_json(bad.to_json()), FormatError);
  // Forged beyond what training allows: a 160 GB allocation and a torch stack trace. A size that
  // is not an integer was truncated.
  bad = config;
  bad.hidden = 100000;
  ENGRAM_EXPECT_THROW_WITH(NpiConfig::from_json(bad.to_json()), FormatError,
                           "hidden is 100000, not an integer in 1..8192");
  bad = config;
  bad.state_dim = 100000000;
  EXPECT_THROW(NpiConfig::from_json(bad.to_json()), FormatError);
  auto j = nlohmann::json::parse(config.to_json());
  j["hidden"] = 64.5;
  ENGRAM_EXPECT_THROW_WITH(NpiConfig::from_json(j.dump()), FormatError, "hidden is 64.5");
}

TEST(NpiConfig, LayersRoundTripAndDefaultToEngram) {
  NpiConfig config = small_config(addition());
  EXPECT_EQ(config.layers_impl, "engram");
  config.layers_impl = "torch";
  EXPECT_EQ(NpiConfig::from_json(config.to_json()).layers_impl, "torch");
  auto j = nlohmann::json::parse(config.to_json());
  j.erase("layers_impl");
  EXPECT_EQ(NpiConfig::from_json(j.dump()).layers_impl, "engram");
  j["layers_impl"] = "cudnn";
  EXPECT_THROW(NpiConfig::from_json(j.dump()), FormatError);
}

// Checkpoints written before nn/ existed name a "core" instead.
TEST(NpiConfig, OlderCheckpointsCoreMapsToLayers) {
  auto j = nlohmann::json::parse(small_config(addition()).to_json());
  j.erase("layers_impl");
  j["core"] = "fused";
  EXPECT_EQ(NpiConfig::from_json(j.dump()).layers_impl, "engram");
  j["core"] = "torch";
  EXPECT_EQ(NpiConfig::from_json(j.dump()).layers_impl, "torch");
  j["core"] = "cudnn";
  EXPECT_THROW(NpiConfig::from_json(j.dump()), FormatError);
}

// ---------------------------------------------------------------------------------------------
// Training data

TEST(FeatureIndices, OneColumnPerObservationSlotThenPerArgument) {
  std::vector<long> out(7);
  feature_indices({11, 11, 11, 11}, 10, {5, 7, 10, 2}, {3, 1, 0}, out.data());
  EXPECT_EQ(out, (std::vector<long>{5, 11 + 7, 22 + 10, 33 + 2, 44 + 3, 54 + 1, 64 + 0}));
}

TEST_F(NpiTest, DatasetBatchPacksInvocationsLongestFirstAlignedWithTheTrace) {
  const Task& task = addition();
  const auto set = datasets::generate_traces(task, {1, 3, 1, 5});
  const NpiDataset data(task, set.traces);
  ASSERT_EQ(data.num_traces(), 3u);
  std::size_t total = 0;
  for (const auto& t : set.traces) {
    for (const auto& inv : t.invocations) total += inv.steps.size();
  }
  EXPECT_EQ(data.num_steps(), total);

  const std::vector<std::size_t> chosen{2, 0};
  const NpiBatch batch = data.batch(chosen);
  // The invocations of the chosen traces, ordered as the batch promises: by decreasing length,
  // ties in trace order.
  std::vector<const datasets::Invocation*> invs;
  for (auto t : chosen) {
    for (const auto& inv : set.traces[t].invocations) invs.push_back(&inv);
  }
  std::stable_sort(invs.begin(), invs.end(),
                   [](auto* a, auto* b) { return a->steps.size() > b->steps.size(); });

  const auto sizes = batch.batch_sizes;
  ASSERT_EQ(sizes.dim(), 1);
  ASSERT_EQ(sizes.size(0), static_cast<long>(invs.front()->steps.size()));
  EXPECT_EQ(sizes[0].item<long>(), static_cast<long>(invs.size()));
  for (long t = 1; t < sizes.size(0); ++t) {
    EXPECT_LE(sizes[t].item<long>(), sizes[t - 1].item<long>()) << "time " << t;
  }
  const long n = sizes.sum().item<long>();
  ASSERT_EQ(batch.features.sizes(), (std::vector<int64_t>{n, 74}));
  ASSERT_EQ(batch.programs.size(0), n);
  ASSERT_EQ(batch.end_target.size(0), n);
  ASSERT_EQ(batch.callee_target.size(0), n);
  ASSERT_EQ(batch.arg_targets.sizes(), (std::vector<int64_t>{n, 3}));
  EXPECT_TRUE(torch::equal(batch.call_mask, 1.0 - batch.end_target));
  EXPECT_TRUE(torch::equal(batch.features.sum(1), torch::full({n}, 7.0f))) << "7 one-hot slots";

  long offset = 0;
  for (long t = 0; t < sizes.size(0); ++t) {
    for (long j = 0; j < sizes[t].item<long>(); ++j) {
      const long row = offset + j;
      const auto& inv = *invs[j];
      ASSERT_LT(t, static_cast<long>(inv.steps.size()));
      const auto& step = inv.steps[t];
      SCOPED_TRACE("time " + std::to_string(t) + ", sequence " + std::to_string(j));
      std::vector<long> hot(7);
      feature_indices(task.observation_sizes(), task.arg_size(), step.observation, inv.args,
                      hot.data());
      for (long col : hot) EXPECT_EQ(batch.features[row][col].item<float>(), 1.0f);
      EXPECT_EQ(batch.programs[row].item<long>(), inv.program);
      EXPECT_EQ(batch.end_target[row].item<float>(), step.end ? 1.0f : 0.0f);
      if (!step.end) {
        EXPECT_EQ(batch.callee_target[row].item<long>(), step.callee);
        for (int a = 0; a < 3; ++a) {
          EXPECT_EQ(batch.arg_targets[row][a].item<long>(), step.callee_args[a]);
        }
      }
    }
    offset += sizes[t].item<long>();
  }
}

TEST_F(NpiTest, WorkloadLossIsFiniteAndReachesEveryParameter) {
  const Task& task = addition();
  const auto set = datasets::generate_traces(task, {1, 2, 2, 1});
  const NpiDataset data(task, set.traces);
  NpiModel model(small_config(task));
  NpiWorkload workload(model, data);
  EXPECT_EQ(workload.num_examples(), 4u);
  const auto out = workload.forward(*workload.make_batch({0, 3}));
  ASSERT_EQ(out.loss.dim(), 0);
  EXPECT_TRUE(std::isfinite(out.loss.item<double>()));
  EXPECT_GT(out.loss.item<double>(), 0);
  for (const char* key : {"step_error", "end_loss", "program_loss", "arg_loss"}) {
    ASSERT_EQ(out.metrics.count(key), 1u) << key;
  }
  EXPECT_NEAR(
      out.loss.item<double>(),
      out.metrics.at("end_loss") + out.metrics.at("program_loss") + out.metrics.at("arg_loss"),
      1e-4);
  out.loss.backward();
  for (const auto& p : model->named_parameters()) {
    ASSERT_TRUE(p.value().grad().defined()) << p.key();
    EXPECT_GT(p.value().grad().abs().sum().item<double>(), 0) << p.key();
  }
}

TEST_F(NpiTest, EngramLayersLossAndGradientsEqualTorchLayers) {
  // Full-size model (hidden 256, 2 layers) on real packed batches of several traces.
  for (const char* name : {"addition", "sort"}) {
    SCOPED_TRACE(name);
    const Task& task = task_by_name(name);
    const auto set = datasets::generate_traces(task, {2, 6, 2, 7});
    const NpiDataset data(task, set.traces);
    NpiConfig config = NpiConfig::for_task(task);
    NpiModel fused(with_layers(config, "engram"));
    NpiModel reference(with_layers(config, "torch"));
    {
      torch::NoGradGuard no_grad;
      const auto source = fused->named_parameters();
      for (auto& p : reference->named_parameters()) p.value().copy_(source[p.key()]);
    }
    const NpiBatch batch = data.batch({0, 3, 5, 8, 9});
    ASSERT_GT(batch.batch_sizes.size(0), 2);
    ASSERT_LT(batch.batch_sizes[-1].item<long>(), batch.batch_sizes[0].item<long>());
    NpiWorkload fused_workload(fused, data), reference_workload(reference, data);
    const auto a = fused_workload.forward(batch);
    const auto b = reference_workload.forward(batch);
    a.loss.backward();
    b.loss.backward();
    EXPECT_LT(relative_difference(a.loss, b.loss), 1e-5);
    const auto expected = reference->named_parameters();
    for (const auto& p : fused->named_parameters()) {
      SCOPED_TRACE(p.key());
      ASSERT_TRUE(p.value().grad().defined());
      EXPECT_LT(relative_difference(p.value().grad(), expected[p.key()].grad()), 1e-5);
    }
  }
}

// On a GPU: a few SGD steps of both layer implementations on packed batches of several traces
// land where the CPU's land, and the interpreter on the GPU takes the CPU's decisions.
TEST_F(NpiTest, OnCudaAFewStepsMatchTheCpuAndTheInterpreterAgrees) {
  ENGRAM_SKIP_WITHOUT_CUDA();
  const Task& task = addition();
  const auto set = datasets::generate_traces(task, {2, 6, 2, 7});
  const NpiDataset data(task, set.traces);
  trainer::TrainingOptions options;
  options.optimizer = "sgd";
  options.learning_rate = 0.1;
  for (const char* impl : {"engram", "torch"}) {
    SCOPED_TRACE(impl);
    auto run = [&](const std::string& device, NpiModel& model) {
      NpiWorkload workload(model, data);
      return testing::run_on(workload, options, device, {0, 3, 5, 8, 9}, 3);
    };
    torch::manual_seed(0);
    NpiModel on_cpu(with_layers(NpiConfig::for_task(task), impl));
    torch::manual_seed(0);
    NpiModel on_gpu(with_layers(NpiConfig::for_task(task), impl));
    const auto cpu = run("cpu", on_cpu);
    const auto gpu = run("cuda", on_gpu);
    const auto [loss, parameter] =
        testing::largest_differences(cpu, gpu, std::string("npi ") + impl);
    EXPECT_LT(loss, 1e-4);
    EXPECT_LT(parameter, 1e-4);
    const std::vector<std::string> inputs{"58+67", "999+1", "12345+678"};
    const auto on_device = interpret(on_gpu, task, inputs);
    on_gpu->to(torch::kCPU);
    const auto on_host = interpret(on_gpu, task, inputs);
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      EXPECT_EQ(on_device[i].output, on_host[i].output) << inputs[i];
      EXPECT_TRUE(on_device[i].calls == on_host[i].calls) << inputs[i];
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Overfitting one trace, then interpreting

TEST_F(NpiTest, OverfitsOneAdditionTraceAndTheInterpreterReproducesIt) {
  const Task& task = addition();
  const std::string input = "58+67";  // two carries and a new leading digit
  const Trace trace = task.teach(input);
  ASSERT_EQ(trace.output, "125");
  const NpiDataset data(task, {trace});
  // Hidden 64: with hidden 32 this seed settled, on an Intel Xeon, in a minimum with one decision
  // of 11 wrong that 6000 steps did not leave (on an AMD EPYC it fitted); with hidden 64 seeds 0
  // to 9 fitted there in 50 to 80 steps.
  NpiModel model(small_config(task, 64));
  NpiWorkload workload(model, data);
  trainer::TrainingOptions options;
  options.steps = 1000;  // an upper bound
  options.batch = 1;
  options.learning_rate = 2e-2;
  options.log_every = 10;
  double step_error = 1;
  const trainer::LogCallback on_log = [&](long, const std::map<std::string, double>& metrics) {
    step_error = metrics.at("step_error");
    return step_error == 0;  // every decision of the last 10 steps matched the trace
  };
  const auto summary = trainer::train(workload, options, on_log);
  ASSERT_EQ(step_error, 0) << "not fitted after " << summary.steps << " steps";

  const auto runs = interpret(model, task, {input});
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].error, "");
  EXPECT_EQ(runs[0].output, "125");
  EXPECT_EQ(runs[0].output, task.solve(input));
  const auto reference = datasets::call_sequence(trace, task.programs());
  EXPECT_TRUE(runs[0].calls == reference)
      << "generated " << runs[0].calls.size() << " calls, the trace has " << reference.size();
  long trace_steps = 0;
  for (const auto& inv : trace.invocations) trace_steps += static_cast<long>(inv.steps.size());
  EXPECT_EQ(runs[0].steps, trace_steps);

  // Problems interpreted together behave exactly as when run one by one, whatever each does.
  const std::vector<std::string> inputs{"58+67", "5+7", "123+989", "0+0", "4+5", "1000+1", "58+67"};
  const auto together = interpret(model, task, inputs);
  ASSERT_EQ(together.size(), inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const auto alone = interpret(model, task, {inputs[i]});
    SCOPED_TRACE(inputs[i]);
    EXPECT_EQ(together[i].input, inputs[i]);
    EXPECT_EQ(together[i].output, alone[0].output);
    EXPECT_EQ(together[i].error, alone[0].error);
    EXPECT_EQ(together[i].steps, alone[0].steps);
    EXPECT_TRUE(together[i].calls == alone[0].calls);
  }
}

/// A model whose decisions are fixed: it returns at every step if `ends`, else it calls `callee`
/// with `args`, whatever it observes.
NpiModel rigged_model(const Task& task, bool ends, int callee, Args args) {
  const NpiConfig config = small_config(task);
  NpiModel model(config);
  torch::NoGradGuard no_grad;
  auto params = model->named_parameters();
  for (const char* head : {"end_head", "key_head", "arg_head"}) {
    params[std::string(head) + ".weight"].zero_();
    params[std::string(head) + ".bias"].zero_();
  }
  params["end_head.bias"].fill_(ends ? 10.0 : -10.0);
  params["program_keys"].zero_();
  params["program_keys"][callee][0] = 1.0;
  params["key_head.bias"][0] = 10.0;
  for (int a = 0; a < 3; ++a) params["arg_head.bias"][a * config.arg_size + args[a]] = 10.0;
  return model;
}

TEST_F(NpiTest, StepErrorIsTheShareOfStepsWhoseDecisionDiffers) {
  const Task& task = addition();
  const auto set = datasets::generate_traces(task, {1, 2, 3, 2});
  const NpiDataset data(task, set.traces);
  // It returns at every step: right at each return step, wrong at every other.
  NpiModel model = rigged_model(task, true, 0, {0, 0, 0});
  NpiWorkload workload(model, data);
  const std::vector<std::size_t> all{0, 1, 2, 3};
  const NpiBatch batch = data.batch(all);
  const double steps = static_cast<double>(batch.end_target.size(0));
  const double returns = batch.end_target.sum().item<double>();
  ASSERT_GT(returns, 0);
  ASSERT_LT(returns, steps);
  const auto out = workload.forward(*workload.make_batch(all));
  EXPECT_NEAR(out.metrics.at("step_error"), 1.0 - returns / steps, 1e-6);
}

using InterpreterTest = NpiTest;

TEST_F(InterpreterTest, ARootThatReturnsAtOnceEndsCleanly) {
  NpiModel model = rigged_model(addition(), true, 0, {0, 0, 0});
  const auto runs = interpret(model, addition(), {"25+17"});
  EXPECT_EQ(runs[0].error, "");
  EXPECT_EQ(runs[0].steps, 1);
  ASSERT_EQ(runs[0].calls.size(), 1u);
  EXPECT_EQ(runs[0].calls[0], (datasets::Call{AdditionTask::kAdd, {0, 0, 0}, 0}));
  EXPECT_EQ(runs[0].output, "");
}

TEST_F(InterpreterTest, StepLimitStopsARunawayProgram) {
  NpiModel model = rigged_model(addition(), false, AdditionTask::kAdd1, {0, 0, 0});
  const auto runs = interpret(model, addition(), {"25+17"}, {5, 1000});
  EXPECT_NE(runs[0].error.find("step limit of 5 exceeded"), std::string::npos) << runs[0].error;
  EXPECT_EQ(runs[0].steps, 6);
  ASSERT_EQ(runs[0].calls.size(), 6u) << "the root and five calls";
  for (int k = 0; k < 6; ++k) EXPECT_EQ(runs[0].calls[k].depth, k);
}

TEST_F(InterpreterTest, DepthLimitStopsRunawayRecursion) {
  NpiModel model = rigged_model(addition(), false, AdditionTask::kAdd1, {0, 0, 0});
  const auto runs = interpret(model, addition(), {"25+17"}, {1000, 3});
  EXPECT_NE(runs[0].error.find("call depth limit of 3 exceeded"), std::string::npos)
      << runs[0].error;
  EXPECT_EQ(runs[0].steps, 3);
  int deepest = 0;
  for (const auto& call : runs[0].calls) deepest = std::max(deepest, call.depth);
  EXPECT_EQ(deepest, 3);
}

TEST_F(InterpreterTest, DefaultLimitsScaleWithEachProblemsLength) {
  NpiModel model = rigged_model(addition(), false, AdditionTask::kAdd1, {0, 0, 0});
  const std::vector<std::string> inputs{"5+7", "1234567890+1", "12+34"};
  const auto runs = interpret(model, addition(), inputs);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const int length = addition().make_environment(inputs[i])->length();
    const int depth = addition().default_limits(length).max_depth;
    EXPECT_NE(runs[i].error.find("depth limit of " + std::to_string(depth) + " "),
              std::string::npos)
        << runs[i].error;
  }
  // The inputs' limits differ, so one limit for the whole batch would fail the loop above.
  const auto depth_of = [](const std::string& input) {
    return addition().default_limits(addition().make_environment(input)->length()).max_depth;
  };
  EXPECT_LT(depth_of(inputs[0]), depth_of(inputs[1]));
}

TEST_F(InterpreterTest, AnImpossibleActStopsTheProblemWithTheReason) {
  // MOVE(IN1, RIGHT) from the rightmost column.
  NpiModel model = rigged_model(addition(), false, AdditionTask::kMove, {AdditionTask::kIn1, 1, 0});
  const auto runs = interpret(model, addition(), {"25+17", "3+4"});
  for (const auto& run : runs) {
    EXPECT_NE(run.error.find("MOVE failed"), std::string::npos) << run.error;
    EXPECT_NE(run.error.find("off the scratchpad"), std::string::npos) << run.error;
    EXPECT_EQ(run.steps, 1);
    EXPECT_EQ(run.calls.size(), 2u);
  }
}

TEST_F(InterpreterTest, MalformedInputIsAnInputError) {
  NpiModel model = rigged_model(addition(), true, 0, {0, 0, 0});
  EXPECT_THROW(interpret(model, addition(), {"25+17", "12+"}), InputError);
}

// ---------------------------------------------------------------------------------------------
// Public API (npi/Npi.h)

TEST(ParseLengths, AcceptsPositiveIntegersSeparatedByCommas) {
  EXPECT_EQ(parse_lengths("100"), (std::vector<int>{100}));
  EXPECT_EQ(parse_lengths("20,60,100"), (std::vector<int>{20, 60, 100}));
  for (const std::string bad : {"", "0", "-3", "1,,2", "1,2,", ",1", "abc", "5x", "1.5"}) {
    EXPECT_THROW(parse_lengths(bad), UsageError) << "'" << bad << "'";
  }
}

class NpiApiTest : public NpiTest {
 protected:
  void SetUp() override {
    NpiTest::SetUp();
    datasets::write_trace_file(data_path_, datasets::generate_traces(addition(), {1, 3, 4, 1}));
  }
  TrainOptions train_options() const {
    TrainOptions t;
    t.task = "addition";
    t.data_path = data_path_;
    t.out_path = model_path_;
    t.training.steps = 5;
    t.training.batch = 4;
    t.hidden = 16;
    t.training.threads = 1;
    t.training.seed = 3;
    return t;
  }
  RunOptions run_options(const std::string& input) const {
    RunOptions r;
    r.model_path = model_path_;
    r.task = "addition";
    r.input = input;
    r.threads = 1;
    return r;
  }

  std::string data_path_ = dir_.file("addition.jsonl");
  std::string model_path_ = dir_.file("model.pt");
};

TEST_F(NpiApiTest, SavedModelRunsExactlyAsTheModelInMemory) {
  TrainOptions t = train_options();
  t.training.steps = 30;  // enough to leave the random start: the runs below make several calls
  t.training.learning_rate = 1e-2;
  const TrainReport report = train_npi(t);
  EXPECT_EQ(report.steps, 30);
  EXPECT_TRUE(std::isfinite(report.final_loss));

  // The same training in memory, as train_npi does it.
  torch::manual_seed(t.training.seed);
  NpiConfig config;
  config.task = "addition";
  config.num_programs = 6;
  config.observation_sizes = addition().observation_sizes();
  config.arg_size = addition().arg_size();
  config.hidden = t.hidden;
  NpiModel model(config);
  const NpiDataset dataset(addition(), datasets::read_trace_file(t.data_path).traces);
  NpiWorkload workload(model, dataset);
  trainer::train(workload, t.training);

  std::size_t most_calls = 0;
  for (const std::string input : {"25+17", "999+1", "0+0", "12345+678"}) {
    SCOPED_TRACE(input);
    const RunReport loaded = run_npi(run_options(input));
    const auto in_memory = interpret(model, addition(), {input})[0];
    most_calls = std::max(most_calls, in_memory.calls.size());
    EXPECT_EQ(loaded.task, "addition");
    EXPECT_EQ(loaded.input, input);
    EXPECT_EQ(loaded.expected, addition().solve(input));
    EXPECT_EQ(loaded.output, in_memory.output);
    EXPECT_EQ(loaded.error, in_memory.error);
    EXPECT_EQ(loaded.steps, in_memory.steps);
    EXPECT_TRUE(loaded.calls == in_memory.calls);
    EXPECT_EQ(loaded.correct, loaded.error.empty() && loaded.output == loaded.expected);
  }
  EXPECT_GT(most_calls, 5u) << "the comparison is only telling if the model does something";
}

TEST_F(NpiApiTest, EvaluationReportsAreConsistent) {
  train_npi(train_options());
  EvalOptions e;
  e.model_path = model_path_;
  e.task = "addition";
  e.lengths = {1, 4};
  e.count = 6;
  e.threads = 1;
  e.max_failures = 2;
  const auto reports = evaluate_npi(e);
  ASSERT_EQ(reports.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    const auto& r = reports[i];
    EXPECT_EQ(r.task, "addition");
    EXPECT_EQ(r.length, e.lengths[i]);
    EXPECT_EQ(r.count, 6);
    EXPECT_DOUBLE_EQ(r.accuracy, r.correct / 6.0);
    // An exact trace computes the right answer; every other problem is a failure, of which the
    // report keeps the first max_failures.
    EXPECT_LE(r.trace_exact, r.accuracy);
    const long inexact = 6 - std::lround(r.trace_exact * 6);
    EXPECT_EQ(static_cast<long>(r.failures.size()), std::min(2L, inexact));
    for (const auto& f : r.failures) {
      EXPECT_EQ(f.expected, addition().solve(f.input));
      EXPECT_TRUE(f.output != f.expected || !f.error.empty() || f.first_divergence >= 0);
    }
  }
  // Deterministic in the seed.
  const auto again = evaluate_npi(e);
  for (std::size_t i = 0; i < 2; ++i) EXPECT_EQ(again[i].correct, reports[i].correct);
}

TEST_F(NpiApiTest, InvalidRequestsAreUsageErrorsAndBadFilesRuntimeErrors) {
  // Input is validated before the model file is looked at.
  ENGRAM_EXPECT_THROW_WITH(run_npi(run_options("12+")), UsageError, "12+");
  ENGRAM_EXPECT_THROW_WITH(run_npi(run_options("25+17")), std::runtime_error, model_path_);
  train_npi(train_options());
  RunOptions sort = run_options("3,1,2");
  sort.task = "sort";
  ENGRAM_EXPECT_THROW_WITH(run_npi(sort), FormatError, "task 'addition'");
  sort.task = "multiply";
  EXPECT_THROW(run_npi(sort), UsageError);

  EvalOptions e;
  e.model_path = model_path_;
  e.task = "sort";
  e.lengths = {1};
  e.threads = 1;
  ENGRAM_EXPECT_THROW_WITH(evaluate_npi(e), UsageError, "at least 2");
  e.task = "addition";
  e.lengths = {};
  EXPECT_THROW(evaluate_npi(e), UsageError);
  e.lengths = {2};
  e.count = 0;
  EXPECT_THROW(evaluate_npi(e), UsageError);
}

TEST_F(NpiApiTest, FailedTrainingWritesNoModel) {
  std::filesystem::remove(model_path_);
  auto expect_no_model = [&](TrainOptions t, const char* what) {
    try {
      train_npi(t);
      ADD_FAILURE() << what << ": no error";
    } catch (const std::exception&) {
    }
    EXPECT_EQ(dir_.entries(), std::set<std::string>{"addition.jsonl"}) << what;
  };
  TrainOptions t = train_options();
  t.training.steps = 0;
  expect_no_model(t, "zero steps");
  t = train_options();
  t.training.learning_rate = 0;
  expect_no_model(t, "zero learning rate");
  t = train_options();
  t.data_path = dir_.file("absent.jsonl");
  expect_no_model(t, "missing data");
  t = train_options();
  t.task = "sort";
  expect_no_model(t, "data of another task");
  t = train_options();
  t.out_path = dir_.file("no-such-dir/model.pt");
  expect_no_model(t, "unwritable output");
  t = train_options();
  t.training.threads = -1;
  expect_no_model(t, "negative threads");
}

TEST_F(NpiApiTest, UnwritableOutputFailsBeforeTraining) {
  // With this many steps, training first would run into the test's timeout.
  TrainOptions t = train_options();
  t.training.steps = 100000000;
  t.out_path = dir_.file("no-such-dir/model.pt");
  try {
    train_npi(t);
    FAIL() << "trained into a folder that is not there";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot write '" + t.out_path + "'"), std::string::npos)
        << e.what();
  }
}

TEST(RunReportOutput, CallTreeTextAndJson) {
  const Task& task = addition();
  RunReport report;
  report.task = "addition";
  report.input = "5+7";
  report.output = "12";
  report.expected = "12";
  report.correct = true;
  report.steps = 30;
  report.calls = datasets::call_sequence(task.teach("5+7"), task.programs());
  const std::string text = call_tree_text(report);
  EXPECT_EQ(text.substr(0, 80),
            std::string("ADD\n  ADD1\n    WRITE(OUT, 2)\n    CARRY\n      MOVE(CARRY, LEFT)\n"
                        "      WRITE(CARRY, 1)\n")
                .substr(0, 80));
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), static_cast<long>(report.calls.size()));

  const auto j = nlohmann::json::parse(run_report_json(report));
  EXPECT_EQ(j.at("task"), "addition");
  EXPECT_EQ(j.at("input"), "5+7");
  EXPECT_EQ(j.at("output"), "12");
  EXPECT_EQ(j.at("correct"), true);
  EXPECT_EQ(j.at("steps"), 30);
  EXPECT_FALSE(j.contains("error"));
  const auto& root = j.at("program");
  EXPECT_EQ(root.at("program"), "ADD");
  ASSERT_EQ(root.at("calls").size(), 3u) << "ADD1, LSHIFT, ADD";
  EXPECT_EQ(root["calls"][0]["program"], "ADD1");
  EXPECT_EQ(root["calls"][0]["calls"][0]["text"], "WRITE(OUT, 2)");
  EXPECT_EQ(root["calls"][0]["calls"][0]["args"], nlohmann::json::array({3, 2, 0}));
  EXPECT_EQ(root["calls"][2]["calls"][2]["program"], "ADD");
  // Every call is one node of the tree.
  std::function<std::size_t(const nlohmann::json&)> count = [&](const nlohmann::json& node) {
    std::size_t n = 1;
    for (const auto& child : node.at("calls")) n += count(child);
    return n;
  };
  EXPECT_EQ(count(root), report.calls.size());

  report.error = "step limit of 5 exceeded";
  EXPECT_EQ(nlohmann::json::parse(run_report_json(report)).at("error"), report.error);
}

TEST(EvalReportOutput, OneLengthIsAnObjectSeveralAList) {
  LengthReport a;
  a.task = "addition";
  a.length = 5;
  a.count = 4;
  a.correct = 3;
  a.accuracy = 0.75;
  a.failures.push_back({"1+2", "3", "4", "", 3, "WRITE(OUT, 3)", "WRITE(OUT, 4)"});
  const auto one = nlohmann::json::parse(eval_reports_json({a}));
  ASSERT_TRUE(one.is_object());
  for (const char* key : {"task", "length", "count", "correct", "accuracy", "trace_exact"}) {
    EXPECT_TRUE(one.contains(key)) << key;
  }
  EXPECT_EQ(one.at("failures").at(0).at("generated_call"), "WRITE(OUT, 4)");
  LengthReport b = a;
  b.length = 9;
  const auto two = nlohmann::json::parse(eval_reports_json({a, b}));
  ASSERT_TRUE(two.is_array());
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[1].at("length"), 9);
}

}  // namespace
}  // namespace engram::npi
