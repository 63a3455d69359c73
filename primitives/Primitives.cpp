#include "primitives/Primitives.h"

#include "common/AtomicFile.h"
#include "common/Errors.h"
#include "primitives/PrimitiveNet.h"
#include "trainer/Checkpoint.h"
#include "trainer/Threads.h"
#include "trainer/Trainer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>

namespace engram::primitives {
namespace {

using nlohmann::json;
constexpr const char* kKind = "primitives";

json config_to_json(const PrimitiveNetConfig& c) {
  return json{{"family", c.family}, {"embedding", c.embedding}, {"hidden", c.hidden}};
}

/// One family's network and its tensors as stored in the file.
struct Stored {
  PrimitiveNetConfig config;
  std::vector<std::pair<std::string, at::Tensor>> tensors;  ///< names without the family prefix
};

struct LibraryFile {
  int k = 0;
  std::map<std::string, Stored> networks;  ///< by family
};

LibraryFile read_library(const std::string& path) {
  const auto ck = trainer::load_checkpoint(path, kKind);
  LibraryFile lib;
  try {
    const json config = json::parse(ck.config_json);
    if (!config.at("k").is_number_integer()) throw FormatError("'" + path + "' has no integer K");
    lib.k =
        static_cast<int>(std::clamp<std::int64_t>(config.at("k").get<std::int64_t>(), -1, 1 << 20));
    for (const auto& net : config.at("networks")) {
      const std::string family = net.at("family").get<std::string>();
      if (datasets::find_family(family) == nullptr)
        throw FormatError("'" + path + "' has a network of unknown primitive '" + family + "'");
      Stored stored;
      stored.config = PrimitiveNetConfig::for_family(family, lib.k);
      stored.config.embedding = net.at("embedding").get<int>();
      stored.config.hidden = net.at("hidden").get<int>();
      if (stored.config.embedding < 1 || stored.config.embedding > 8192 ||
          stored.config.hidden < 1 || stored.config.hidden > 8192)
        throw FormatError("'" + path + "' has a network of a size out of range");
      lib.networks[family] = std::move(stored);
    }
  } catch (const json::exception& e) {
    throw FormatError("'" + path + "' has a malformed primitive library header: " + e.what());
  }
  if (lib.k < datasets::kMinDomain || lib.k > datasets::kMaxDomain)
    throw FormatError("'" + path + "' has domain size " + std::to_string(lib.k));
  for (const auto& [name, tensor] : ck.tensors) {
    const auto dot = name.find('.');
    auto it =
        dot == std::string::npos ? lib.networks.end() : lib.networks.find(name.substr(0, dot));
    if (it == lib.networks.end())
      throw FormatError("'" + path + "' has an unexpected tensor '" + name + "'");
    it->second.tensors.emplace_back(name.substr(dot + 1), tensor);
  }
  return lib;
}

void write_library(const std::string& path, const LibraryFile& lib) {
  trainer::Checkpoint ck;
  ck.kind = kKind;
  json nets = json::array();
  for (const auto& [family, stored] : lib.networks) {
    nets.push_back(config_to_json(stored.config));
    for (const auto& [name, tensor] : stored.tensors)
      ck.tensors.emplace_back(family + "." + name, tensor);
  }
  ck.config_json = json{{"k", lib.k}, {"networks", nets}}.dump();
  trainer::save_checkpoint(path, ck);
}

/// Builds the network and loads its tensors; FormatError if they do not fit.
PrimitiveNet build(const Stored& stored, const std::string& path) {
  PrimitiveNet net(stored.config);
  trainer::load_parameters(*net, stored.tensors, path, stored.config.family);
  net->eval();
  return net;
}

FamilyReport score(const PrimitiveNetConfig& config, PrimitiveWorkload& workload) {
  FamilyReport r;
  r.family = config.family;
  r.kind = datasets::kind_name(config.kind);
  r.k = config.k;
  r.examples = static_cast<long>(workload.num_examples());
  r.correct = workload.count_correct();
  r.accuracy = static_cast<double>(r.correct) / static_cast<double>(r.examples);
  r.exact = r.correct == r.examples;
  return r;
}

/// A primitive whose every application runs its network.
class LearnedPrimitive final : public datasets::Primitive {
 public:
  LearnedPrimitive(datasets::PrimitiveRef ref, PrimitiveNet net)
      : Primitive(std::move(ref), net->config().kind, net->config().k), net_(std::move(net)) {}

  int apply(int x, int y, int z) const override {
    const auto& config = net_->config();
    int64_t row[4];
    int n = 0;
    row[n++] = x;
    if (datasets::kind_arity(config.kind) >= 2) row[n++] = y;
    if (datasets::kind_arity(config.kind) >= 3) row[n++] = z;
    if (config.has_parameter) row[n++] = ref().parameter;
    for (int i = 0; i < n; ++i) {
      if (row[i] < 0 || row[i] >= config.k)
        throw datasets::ActError("primitive " + ref().text() + " applied outside its domain");
    }
    c10::InferenceMode inference;
    const auto logits = net_->forward(torch::from_blob(row, {1, n}, torch::kLong));
    return static_cast<int>(logits.argmax(1).item<int64_t>());
  }
  std::string implementation() const override { return "neural"; }

 private:
  mutable PrimitiveNet net_;  ///< forward() is not const in torch; the weights never change
};

}  // namespace

std::vector<FamilyReport> train_primitives(const TrainPrimitivesOptions& options) {
  if (options.out_path.empty()) throw UsageError("--out is required");
  if (options.k < datasets::kMinDomain || options.k > datasets::kMaxDomain) {
    throw UsageError("--k must lie in " + std::to_string(datasets::kMinDomain) + ".." +
                     std::to_string(datasets::kMaxDomain));
  }
  if (options.max_steps < 1) throw UsageError("--steps must be at least 1");
  if (options.batch < 1) throw UsageError("--batch must be at least 1");
  if (options.hidden < 1 || options.hidden > 8192 || options.embedding < 1 ||
      options.embedding > 8192)
    throw UsageError("--hidden and --embedding must be between 1 and 8192");
  if (!(options.learning_rate > 0)) throw UsageError("--lr must be a positive number");
  std::vector<std::string> families = options.families;
  if (families.empty()) {
    if (options.add) throw UsageError("--add needs --primitive naming the families to add");
    for (const auto& f : datasets::primitive_families()) {
      if (f.in_library) families.push_back(f.name);
    }
  }
  for (const auto& family : families) {
    if (datasets::find_family(family) == nullptr) {
      // parse_primitive gives the message with the known names.
      datasets::parse_primitive(family);
      throw UsageError("unknown primitive '" + family + "'");
    }
  }
  LibraryFile lib;
  lib.k = options.k;
  if (options.add) {
    if (!std::filesystem::exists(options.out_path)) {
      throw UsageError("--add: no primitive library at '" + options.out_path +
                       "' (train one first without --add)");
    }
    lib = read_library(options.out_path);
    if (lib.k != options.k) {
      throw UsageError("--add: '" + options.out_path + "' holds primitives for K = " +
                       std::to_string(lib.k) + ", not " + std::to_string(options.k));
    }
  }
  {
    AtomicFile probe(options.out_path, /*binary=*/true);  // fail before training, not after
  }
  trainer::set_threads_option(options.threads);

  std::vector<FamilyReport> reports;
  for (const auto& family : families) {
    auto config = PrimitiveNetConfig::for_family(family, options.k);
    config.hidden = options.hidden;
    config.embedding = options.embedding;
    // Seeded per family, so a network is the same whether trained alone or with the library.
    torch::manual_seed(options.seed);
    PrimitiveNet net(config);
    const Examples examples = all_examples(config);
    PrimitiveWorkload workload(net, examples);
    trainer::TrainerOptions t;
    t.steps = options.max_steps;
    t.batch_size = options.batch;
    t.learning_rate = options.learning_rate;
    t.seed = options.seed;
    t.log_every = 100;
    t.progress = options.progress;
    t.on_log = [&](long, const std::map<std::string, double>&) {
      return workload.count_correct() == static_cast<long>(workload.num_examples());
    };
    const auto start = std::chrono::steady_clock::now();
    const auto summary = trainer::train(workload, t);
    FamilyReport report = score(config, workload);
    report.steps = summary.steps;
    report.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    Stored stored;
    stored.config = config;
    for (const auto& item : net->named_parameters())
      stored.tensors.emplace_back(item.key(), item.value().detach().clone());
    lib.networks[family] = std::move(stored);
    if (options.on_family) options.on_family(report);
    reports.push_back(std::move(report));
  }
  write_library(options.out_path, lib);
  return reports;
}

std::vector<FamilyReport> evaluate_primitives(const std::string& model_path, int threads) {
  trainer::set_threads_option(threads);
  const LibraryFile lib = read_library(model_path);
  std::vector<FamilyReport> reports;
  for (const auto& f : datasets::primitive_families()) {
    const auto it = lib.networks.find(f.name);
    if (it == lib.networks.end()) continue;
    PrimitiveNet net = build(it->second, model_path);
    const Examples examples = all_examples(it->second.config);
    PrimitiveWorkload workload(net, examples);
    reports.push_back(score(it->second.config, workload));
  }
  return reports;
}

std::string family_reports_json(const std::vector<FamilyReport>& reports) {
  json list = json::array();
  bool all_exact = !reports.empty();
  for (const auto& r : reports) {
    json j{{"family", r.family},     {"kind", r.kind},       {"k", r.k},
           {"examples", r.examples}, {"correct", r.correct}, {"accuracy", r.accuracy},
           {"exact", r.exact}};
    if (r.steps > 0) {
      j["steps"] = r.steps;
      j["seconds"] = r.seconds;
    }
    all_exact = all_exact && r.exact;
    list.push_back(std::move(j));
  }
  json out{{"primitives", list}, {"all_exact", all_exact}};
  if (!reports.empty()) out["k"] = reports.front().k;
  return out.dump(2);
}

struct PrimitiveLibrary::State {
  std::string path;
  LibraryFile file;
  std::map<std::string, PrimitiveNet> nets;
};

PrimitiveLibrary::PrimitiveLibrary(std::shared_ptr<State> state) : state_(std::move(state)) {}
PrimitiveLibrary::~PrimitiveLibrary() = default;
PrimitiveLibrary::PrimitiveLibrary(PrimitiveLibrary&&) noexcept = default;
PrimitiveLibrary& PrimitiveLibrary::operator=(PrimitiveLibrary&&) noexcept = default;

PrimitiveLibrary PrimitiveLibrary::load(const std::string& path) {
  auto state = std::make_shared<State>();
  state->path = path;
  state->file = read_library(path);
  for (const auto& [family, stored] : state->file.networks)
    state->nets.emplace(family, build(stored, path));
  return PrimitiveLibrary(std::move(state));
}

int PrimitiveLibrary::domain() const { return state_->file.k; }

std::vector<std::string> PrimitiveLibrary::families() const {
  std::vector<std::string> names;
  for (const auto& [family, net] : state_->nets) names.push_back(family);
  return names;
}

std::shared_ptr<const datasets::Primitive> PrimitiveLibrary::get(
    const datasets::PrimitiveRef& ref) const {
  const auto it = state_->nets.find(ref.family);
  if (it == state_->nets.end()) {
    throw UsageError("the primitive library '" + state_->path + "' has no network for '" +
                     ref.family + "' (add one: engram train primitives --out " + state_->path +
                     " --k " + std::to_string(domain()) + " --add --primitive " + ref.family + ")");
  }
  datasets::check_parameter(ref, domain());
  return std::make_shared<LearnedPrimitive>(ref, it->second);
}

}  // namespace engram::primitives
