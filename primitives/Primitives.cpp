#include "primitives/Primitives.h"

#include "common/AtomicFile.h"
#include "common/Errors.h"
#include "common/Subprocess.h"
#include "nn/Width.h"
#include "primitives/PrimitiveNet.h"
#include "primitives/PrimitiveWorkload.h"
#include "trainer/Checkpoint.h"
#include "trainer/DataParallel.h"
#include "trainer/Device.h"
#include "trainer/Threads.h"
#include "trainer/Trainer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

namespace engram::primitives {
namespace {

using nlohmann::json;
constexpr const char* kKind = "primitives";

json config_to_json(const PrimitiveNetConfig& c) {
  json j{{"family", c.family}, {"embedding", c.embedding}, {"hidden", c.hidden}};
  // A table family (engram synth) travels with its table: the file defines it for its readers.
  if (const auto* table = datasets::find_table_family(c.family)) {
    j["table"] = json{{"kind", datasets::kind_name(table->kind)},
                      {"values", table->table},
                      {"help", table->help}};
  }
  return j;
}

/// Registers the table family stored with a network (throws FormatError for a bad one).
void register_stored_table(const json& net, int k, const std::string& path) {
  const std::string family = net.at("family").get<std::string>();
  const json& t = net.at("table");
  datasets::TableFamily table;
  table.name = family;
  const std::string kind = t.at("kind").get<std::string>();
  if (kind == "unary") {
    table.kind = datasets::PrimitiveKind::kUnary;
  } else if (kind == "predicate") {
    table.kind = datasets::PrimitiveKind::kPredicate;
  } else if (kind == "binary") {
    table.kind = datasets::PrimitiveKind::kBinary;
  } else {
    throw FormatError("'" + path + "' has a table of unknown kind '" + kind + "'");
  }
  table.k = k;
  table.table = t.at("values").get<std::vector<int>>();
  table.help = t.at("help").get<std::string>();
  try {
    datasets::register_table_family(table);
  } catch (const InputError& e) {
    throw FormatError("'" + path + "' has a bad table for '" + family + "': " + e.what());
  }
}

struct LibraryFile {
  int k = 0;
  std::map<std::string, PrimitiveNet> networks;  ///< by family, in eval mode when read
};

LibraryFile read_library(const std::string& path) {
  const auto ck = trainer::load_checkpoint(path, kKind);
  LibraryFile lib;
  std::map<std::string, PrimitiveNetConfig> configs;  ///< by family
  try {
    const json config = json::parse(ck.config_json);
    if (!config.at("k").is_number_integer()) throw FormatError("'" + path + "' has no integer K");
    lib.k =
        static_cast<int>(std::clamp<std::int64_t>(config.at("k").get<std::int64_t>(), -1, 1 << 20));
    for (const auto& net : config.at("networks")) {
      const std::string family = net.at("family").get<std::string>();
      if (net.contains("table")) register_stored_table(net, lib.k, path);
      if (datasets::find_family(family) == nullptr)
        throw FormatError("'" + path + "' has a network of unknown primitive '" + family + "'");
      PrimitiveNetConfig stored = PrimitiveNetConfig::for_family(family, lib.k);
      stored.embedding = net.at("embedding").get<int>();
      stored.hidden = net.at("hidden").get<int>();
      if (stored.embedding < 1 || stored.embedding > nn::kMaxWidth || stored.hidden < 1 ||
          stored.hidden > nn::kMaxWidth)
        throw FormatError("'" + path + "' has a network of a size out of range");
      configs[family] = std::move(stored);
    }
  } catch (const json::exception& e) {
    throw FormatError("'" + path + "' has a malformed primitive library header: " + e.what());
  }
  if (lib.k < datasets::kMinDomain || lib.k > datasets::kMaxDomain)
    throw FormatError("'" + path + "' has domain size " + std::to_string(lib.k));
  for (const auto& [name, tensor] : ck.tensors) {
    const auto dot = name.find('.');
    if (dot == std::string::npos || configs.count(name.substr(0, dot)) == 0)
      throw FormatError("'" + path + "' has an unexpected tensor '" + name + "'");
  }
  // Each network's tensors are stored under its family: "add.out.weight".
  for (const auto& [family, config] : configs) {
    PrimitiveNet net(config);
    trainer::load_parameters(*net, ck, path, family);
    net->eval();
    lib.networks.emplace(family, std::move(net));
  }
  return lib;
}

void write_library(const std::string& path, const LibraryFile& lib) {
  trainer::Checkpoint ck;
  ck.kind = kKind;
  json nets = json::array();
  for (const auto& [family, net] : lib.networks) {
    nets.push_back(config_to_json(net->config()));
    trainer::add_parameters(ck, *net, family);
  }
  ck.config_json = json{{"k", lib.k}, {"networks", nets}}.dump();
  trainer::save_checkpoint(path, ck);
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
  if (options.out_path.empty()) throw InvalidOption("out_path", "is required");
  if (options.k < datasets::kMinDomain || options.k > datasets::kMaxDomain) {
    throw InvalidOption("k", "must lie in " + std::to_string(datasets::kMinDomain) + ".." +
                                 std::to_string(datasets::kMaxDomain));
  }
  if (options.training.resume || options.training.checkpoint_every > 0 ||
      !options.training.checkpoint_path.empty()) {
    // A state written on SIGINT would name a --resume this command refuses.
    throw InvalidOption(options.training.resume               ? "resume"
                        : options.training.checkpoint_every > 0 ? "checkpoint_every"
                                                                : "checkpoint_path",
                        "is for one model's training (npi, tbcnn): a primitive library trains "
                        "one small network per family in turn, each in seconds");
  }
  trainer::validate(options.training, /*min_steps=*/1);
  trainer::check_device_support(options.training);
  nn::check_width(options.hidden, "hidden");
  nn::check_width(options.embedding, "embedding");
  std::vector<std::string> families = options.families;
  if (families.empty()) {
    if (options.add) throw InvalidOption("add", "needs the families to add to be named");
    for (const auto& f : datasets::primitive_families()) {
      if (f.in_library) families.push_back(f.name);
    }
  }
  for (std::size_t i = 0; i < families.size(); ++i) {
    const std::string& family = families[i];
    // Named twice, it was trained twice and counted twice, and the file held it once.
    if (std::find(families.begin(), families.begin() + static_cast<std::ptrdiff_t>(i), family) !=
        families.begin() + static_cast<std::ptrdiff_t>(i))
      throw InvalidOption("families", "names '" + family + "' twice");
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
      throw InvalidOption("add", "finds no primitive library at '" + options.out_path +
                                     "' (train one first without adding)");
    }
    lib = read_library(options.out_path);
    if (lib.k != options.k) {
      throw InvalidOption("add", "to '" + options.out_path + "': it holds primitives for K = " +
                                     std::to_string(lib.k) + ", not " + std::to_string(options.k));
    }
  }
  if (options.training.writes_files()) {
    check_writable(options.out_path);  // fail before training, not after
  }
  std::vector<FamilyReport> reports;
  const trainer::JobScope job(options.training);  // one job for every family's session
  // One metrics file for the library, each family's lines in turn with its name: the trainer
  // writes a file per session (it would keep only the last family's), so each family's session
  // writes into a scratch file that is then copied over.
  trainer::TrainingOptions training = options.training;
  std::ofstream metrics;
  std::optional<ScratchDir> scratch;
  if (!options.training.metrics_path.empty() && options.training.writes_files()) {
    metrics.open(options.training.metrics_path, std::ios::out | std::ios::trunc);
    if (!metrics)
      throw std::runtime_error("cannot write metrics file '" + options.training.metrics_path +
                               "'");
    scratch.emplace("primitives-metrics");
  }
  for (const auto& family : families) {
    if (scratch) training.metrics_path = scratch->file(family + ".jsonl");
    auto config = PrimitiveNetConfig::for_family(family, options.k);
    config.hidden = options.hidden;
    config.embedding = options.embedding;
    // Seeded per family, so a network is the same whether trained alone or with the library.
    torch::manual_seed(options.training.seed);
    PrimitiveNet net(config);
    const Examples examples = all_examples(config);
    PrimitiveWorkload workload(net, examples);
    const trainer::LogCallback stop_when_exact = [&](long, const std::map<std::string, double>&) {
      return workload.count_correct() == static_cast<long>(workload.num_examples());
    };
    const auto start = std::chrono::steady_clock::now();
    const auto summary = trainer::train(workload, training, stop_when_exact);
    if (scratch) {
      std::ifstream lines(training.metrics_path);
      for (std::string line; std::getline(lines, line);) {
        nlohmann::json entry = nlohmann::json::parse(line);
        entry["family"] = family;
        metrics << entry.dump() << '\n';
      }
      metrics.flush();
      if (!metrics)
        throw std::runtime_error("cannot write metrics file '" + options.training.metrics_path +
                                 "'");
    }
    FamilyReport report = score(config, workload);
    net->to(torch::kCPU);  // the library's networks run on the CPU (LearnedPrimitive::apply)
    report.steps = summary.steps;
    report.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    lib.networks.insert_or_assign(family, net);
    if (options.on_family) options.on_family(report);
    reports.push_back(std::move(report));
  }
  if (options.training.writes_files()) write_library(options.out_path, lib);
  return reports;
}

std::vector<FamilyReport> evaluate_primitives(const std::string& model_path, int threads,
                                              const std::string& device) {
  trainer::set_threads_option(threads);
  const c10::Device where = trainer::resolve_device(device);
  const LibraryFile lib = read_library(model_path);
  // The catalog's families in its order, then the table families the file defines.
  std::vector<std::string> order;
  for (const auto& f : datasets::primitive_families())
    if (lib.networks.count(f.name) != 0) order.push_back(f.name);
  for (const auto& [family, net] : lib.networks)
    if (datasets::find_table_family(family) != nullptr) order.push_back(family);
  std::vector<FamilyReport> reports;
  for (const auto& family : order) {
    const PrimitiveNet& net = lib.networks.at(family);
    const Examples examples = all_examples(net->config());
    PrimitiveWorkload workload(net, examples);
    workload.to_device(where);
    reports.push_back(score(net->config(), workload));
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
};

PrimitiveLibrary::PrimitiveLibrary(std::shared_ptr<State> state) : state_(std::move(state)) {}
PrimitiveLibrary::~PrimitiveLibrary() = default;
PrimitiveLibrary::PrimitiveLibrary(PrimitiveLibrary&&) noexcept = default;
PrimitiveLibrary& PrimitiveLibrary::operator=(PrimitiveLibrary&&) noexcept = default;

PrimitiveLibrary PrimitiveLibrary::load(const std::string& path) {
  auto state = std::make_shared<State>();
  state->path = path;
  state->file = read_library(path);
  return PrimitiveLibrary(std::move(state));
}

int PrimitiveLibrary::domain() const { return state_->file.k; }

std::vector<std::string> PrimitiveLibrary::families() const {
  std::vector<std::string> names;
  for (const auto& [family, net] : state_->file.networks) names.push_back(family);
  return names;
}

std::shared_ptr<const datasets::Primitive> PrimitiveLibrary::get(
    const datasets::PrimitiveRef& ref) const {
  const auto it = state_->file.networks.find(ref.family);
  if (it == state_->file.networks.end()) {
    throw UsageError("the primitive library '" + state_->path + "' has no network for '" +
                     ref.family + "' (add one: engram train primitives --out " + state_->path +
                     " --k " + std::to_string(domain()) + " --add --primitive " + ref.family + ")");
  }
  datasets::check_parameter(ref, domain());
  return std::make_shared<LearnedPrimitive>(ref, it->second);
}

}  // namespace engram::primitives
