#pragma once
/// \file
/// `engram bench tbcnn`: parse throughput of the tree-sitter front end (datasets/CodeTree.h)
/// beside raw tree-sitter parsing of the same files, and TBCNN training throughput (trees/s,
/// nodes/s) with its peak memory (memory/MemoryTracker.h), written as JSON.
///
/// \code
///   engram::bench::TbcnnBenchOptions o;  o.json_path = "tbcnn.json";  o.corpus_path = "c.corpus";
///   engram::bench::run_tbcnn_bench(o, std::cout);
/// \endcode

#include <cstdint>
#include <ostream>
#include <string>

namespace engram::bench {

struct TbcnnBenchOptions {
  std::string json_path;
  std::string src_dir = "/usr/lib/python3.11";  ///< files whose parsing is timed
  std::string language = "python";
  std::string corpus_path;  ///< corpus the training steps run on
  std::string model = "tbcnn";
  long steps = 100;  ///< training steps timed
  int batch = 32;
  int threads = 1;
  /// Where the training steps run (trainer/Device.h); on CUDA the peak is the device's, counted
  /// by memory/CudaMemoryTracker.h.
  std::string device = "cpu";
  int repeats = 3;  ///< parse passes over the files; the fastest counts
  std::uint64_t seed = 1;
};

void run_tbcnn_bench(const TbcnnBenchOptions& options, std::ostream& out);

}  // namespace engram::bench
