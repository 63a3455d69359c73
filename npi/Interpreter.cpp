#include "npi/Interpreter.h"

#include "npi/NpiData.h"

#include <algorithm>
#include <cstring>
#include <memory>

namespace engram::npi {
namespace {

struct Frame {
  int program;
  datasets::Args args;
};

struct Problem {
  std::unique_ptr<datasets::Environment> env;
  datasets::Limits limits;
  std::vector<Frame> stack;
  std::vector<std::vector<float>> saved;  ///< core state of each suspended caller
  bool done = false;
};

}  // namespace

std::vector<Execution> interpret(NpiModel& model, const datasets::Task& task,
                                 const std::vector<std::string>& inputs,
                                 const InterpretOptions& options) {
  torch::NoGradGuard no_grad;
  model->eval();
  const auto& config = model->config();
  const auto& programs = task.programs();
  const long batch = static_cast<long>(inputs.size());
  const long layers = config.layers, hidden = config.hidden;
  const int slots = static_cast<int>(config.observation_sizes.size()) + datasets::kNumArgs;

  std::vector<Problem> problems(inputs.size());
  std::vector<Execution> results(inputs.size());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    Problem& p = problems[i];
    p.env = task.make_environment(inputs[i]);
    p.limits = task.default_limits(p.env->length());
    if (options.max_steps > 0) p.limits.max_steps = options.max_steps;
    if (options.max_depth > 0) p.limits.max_depth = options.max_depth;
    p.stack.push_back({task.root_program(), {0, 0, 0}});
    results[i].input = inputs[i];
    results[i].calls.push_back({task.root_program(), {0, 0, 0}, 0});
  }

  // The model computes on its device; the interpreter's state stays in host memory, where the
  // environments read the decisions and suspended callers keep their rows, and each tick's
  // inputs go to the device and its state and decisions come back.
  const c10::Device device = model->parameters().front().device();
  const auto on_device = [&](const torch::Tensor& t) { return t.to(device); };
  const auto on_host = [](const torch::Tensor& t) { return t.to(torch::kCPU).contiguous(); };
  // Core state of every problem's running frame: [layers, batch, hidden], row-major.
  auto h_all = torch::zeros({layers, batch, hidden});
  auto c_all = torch::zeros({layers, batch, hidden});
  auto row_of = [&](torch::Tensor& t, long layer, long b) {
    return t.data_ptr<float>() + (layer * batch + b) * hidden;
  };
  auto save_row = [&](long b) {
    std::vector<float> state(2 * layers * hidden);
    for (long l = 0; l < layers; ++l) {
      std::memcpy(state.data() + l * hidden, row_of(h_all, l, b), hidden * sizeof(float));
      std::memcpy(state.data() + (layers + l) * hidden, row_of(c_all, l, b),
                  hidden * sizeof(float));
    }
    return state;
  };
  auto load_row = [&](long b, const std::vector<float>* state) {
    for (long l = 0; l < layers; ++l) {
      float* h = row_of(h_all, l, b);
      float* c = row_of(c_all, l, b);
      if (state) {
        std::memcpy(h, state->data() + l * hidden, hidden * sizeof(float));
        std::memcpy(c, state->data() + (layers + l) * hidden, hidden * sizeof(float));
      } else {
        std::fill(h, h + hidden, 0.f);
        std::fill(c, c + hidden, 0.f);
      }
    }
  };

  std::vector<long> active(batch);
  for (long b = 0; b < batch; ++b) active[b] = b;
  std::vector<long> indices, running;
  while (!active.empty()) {
    const long n = static_cast<long>(active.size());
    indices.resize(n * slots);
    running.resize(n);
    for (long r = 0; r < n; ++r) {
      Problem& p = problems[active[r]];
      const Frame& frame = p.stack.back();
      feature_indices(config.observation_sizes, config.arg_size, p.env->observe(), frame.args,
                      indices.data() + r * slots);
      running[r] = frame.program;
    }
    const auto features = on_device(
        torch::zeros({n, config.feature_dim()})
            .scatter_(1, torch::from_blob(indices.data(), {n, slots}, torch::kLong), 1.0));
    const auto program_ids = on_device(torch::from_blob(running.data(), {n}, torch::kLong));
    const bool all = n == batch;
    const auto rows = torch::from_blob(active.data(), {n}, torch::kLong);
    torch::Tensor h = on_device(all ? h_all : h_all.index_select(1, rows));
    torch::Tensor c = on_device(all ? c_all : c_all.index_select(1, rows));
    const NpiHeads out = model->step(features, program_ids, h, c);
    h = on_host(h);
    c = on_host(c);
    if (all) {
      h_all = h.contiguous();
      c_all = c.contiguous();
    } else {
      h_all.index_copy_(1, rows, h);
      c_all.index_copy_(1, rows, c);
    }
    const auto ends = on_host(out.end_logit > 0);
    const auto callees = on_host(out.program_logits.argmax(1));
    const auto args = on_host(out.arg_logits.argmax(2));
    const bool* end_p = ends.data_ptr<bool>();
    const long* callee_p = callees.data_ptr<long>();
    const long* args_p = args.data_ptr<long>();

    for (long r = 0; r < n; ++r) {
      const long b = active[r];
      Problem& p = problems[b];
      Execution& result = results[b];
      auto fail = [&](const std::string& message) {
        result.error = message;
        p.done = true;
      };
      if (++result.steps > p.limits.max_steps) {
        fail("step limit of " + std::to_string(p.limits.max_steps) + " exceeded");
        continue;
      }
      if (end_p[r]) {
        p.stack.pop_back();
        if (p.stack.empty()) {
          p.done = true;
        } else {
          load_row(b, &p.saved.back());
          p.saved.pop_back();
        }
        continue;
      }
      const int callee = static_cast<int>(callee_p[r]);
      const datasets::Args call_args{static_cast<int>(args_p[r * 3]),
                                     static_cast<int>(args_p[r * 3 + 1]),
                                     static_cast<int>(args_p[r * 3 + 2])};
      result.calls.push_back({callee, call_args, static_cast<int>(p.stack.size())});
      if (programs[callee].is_act) {
        try {
          p.env->act(callee, call_args);
        } catch (const datasets::ActError& e) {
          fail(programs[callee].name + " failed: " + e.what());
        }
        continue;
      }
      if (static_cast<int>(p.stack.size()) >= p.limits.max_depth) {
        fail("call depth limit of " + std::to_string(p.limits.max_depth) + " exceeded");
        continue;
      }
      p.saved.push_back(save_row(b));
      load_row(b, nullptr);
      p.stack.push_back({callee, call_args});
    }
    active.erase(
        std::remove_if(active.begin(), active.end(), [&](long b) { return problems[b].done; }),
        active.end());
  }
  for (std::size_t i = 0; i < inputs.size(); ++i) results[i].output = problems[i].env->result();
  return results;
}

}  // namespace engram::npi
