// engram_relu_cuda_bench: throughput of the CUDA ReLU-compression kernels
// (memory/cuda/ReluCompressionCuda.h) against cudaMemcpy (device to device) of the same dense
// bytes, at several sparsities; writes JSON. Built only with nvcc; without a device it writes a
// report saying so ("skipped": true) and exits with 0.
//
//   engram_relu_cuda_bench --json relu_cuda.json [--elements 8388608] [--repeats 20]
//
// Per sparsity: compress_ms (bitmap and counts, scan, reading the number of nonzeros back to the
// host, compaction), decompress_ms, memcpy_ms (cudaMemcpy of 4 * elements bytes), each the
// median over the repeats timed with CUDA events, and GB/s as dense bytes over time. Every
// result is checked bit for bit against the input before it is reported.
#include "bench/KernelThroughput.h"
#include "common/AtomicFile.h"
#include "memory/ReluFormat.h"
#include "memory/cuda/ReluCompressionCuda.h"

#include <cuda_runtime_api.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iostream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using nlohmann::json;
namespace rc = engram::memory::cuda;
namespace rf = engram::memory::relu_format;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

struct Device {
  void* p = nullptr;
  explicit Device(std::size_t bytes) {
    check(cudaMalloc(&p, std::max<std::size_t>(bytes, 1)), "cudaMalloc");
  }
  ~Device() { cudaFree(p); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  template <typename T>
  T* as() const {
    return static_cast<T*>(p);
  }
};

/// Median milliseconds of `run` over `repeats`, timed with events on the default stream.
double median_ms(int repeats, const std::function<void()>& run) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  run();  // warm-up
  std::vector<double> ms;
  for (int i = 0; i < repeats; ++i) {
    check(cudaEventRecord(start), "cudaEventRecord");
    run();
    check(cudaEventRecord(stop), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float t = 0;
    check(cudaEventElapsedTime(&t, start, stop), "cudaEventElapsedTime");
    ms.push_back(t);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

json measure(std::int64_t n, double sparsity, int repeats) {
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<float> value(1e-3f, 1.0f);
  std::bernoulli_distribution zero(sparsity);
  std::vector<float> host(static_cast<std::size_t>(n));
  for (auto& v : host) v = zero(rng) ? 0.0f : value(rng);
  const std::size_t dense = host.size() * sizeof(float);

  Device x(dense), copy(dense), out(dense), bitmap(static_cast<std::size_t>(rf::bitmap_bytes(n))),
      starts(static_cast<std::size_t>(rf::num_blocks(n) + 1) * sizeof(std::int64_t)), values(dense);
  check(cudaMemcpy(x.p, host.data(), dense, cudaMemcpyHostToDevice), "upload");
  std::int64_t nonzeros = 0;
  const auto compress = [&] {
    check(rc::relu_bitmap_and_starts(x.as<float>(), n, bitmap.as<std::uint8_t>(),
                                     starts.as<std::int64_t>()),
          "relu_bitmap_and_starts");
    check(rc::relu_nonzeros(starts.as<std::int64_t>(), n, &nonzeros), "relu_nonzeros");
    check(rc::relu_compact(x.as<float>(), n, bitmap.as<std::uint8_t>(), starts.as<std::int64_t>(),
                           values.as<float>()),
          "relu_compact");
  };
  const auto decompress = [&] {
    check(rc::relu_decompress(bitmap.as<std::uint8_t>(), starts.as<std::int64_t>() + 1,
                              values.as<float>(), n, out.as<float>()),
          "relu_decompress");
  };
  const auto memcpy = [&] {
    check(cudaMemcpy(copy.p, x.p, dense, cudaMemcpyDeviceToDevice), "memcpy");
  };
  const double compress_ms = median_ms(repeats, compress);
  const double decompress_ms = median_ms(repeats, decompress);
  const double memcpy_ms = median_ms(repeats, memcpy);

  std::vector<float> back(host.size());
  check(cudaMemcpy(back.data(), out.p, dense, cudaMemcpyDeviceToHost), "download");
  if (std::memcmp(back.data(), host.data(), dense) != 0) {
    throw std::runtime_error("the round trip is not bit-exact");
  }
  const std::int64_t compressed = rf::compressed_bytes(n, nonzeros);
  json row = engram::bench::kernel_throughput_json(static_cast<double>(dense), compress_ms,
                                                   decompress_ms, memcpy_ms);
  row.update({{"elements", n},
              {"sparsity", static_cast<double>(n - nonzeros) / static_cast<double>(n)},
              {"dense_bytes", dense},
              {"compressed_bytes", compressed},
              {"compression_ratio", static_cast<double>(dense) / static_cast<double>(compressed)}});
  return row;
}

int run(int argc, char** argv) {
  std::string json_path;
  std::int64_t n = std::int64_t{1} << 23;
  int repeats = 20;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--json" && i + 1 < argc) {
      json_path = argv[++i];
    } else if (a == "--elements" && i + 1 < argc) {
      n = std::atoll(argv[++i]);
    } else if (a == "--repeats" && i + 1 < argc) {
      repeats = std::atoi(argv[++i]);
    } else {
      std::cerr << "usage: engram_relu_cuda_bench --json FILE [--elements N] [--repeats R]\n";
      return 2;
    }
  }
  if (json_path.empty() || n < 1 || repeats < 1) {
    std::cerr << "engram_relu_cuda_bench: --json FILE required; --elements and --repeats > 0\n";
    return 2;
  }
  json report{
      {"benchmark", "relu_compression_cuda"}, {"skipped", false}, {"results", json::array()}};
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    report["skipped"] = true;
    report["reason"] = e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device";
    engram::write_file_atomically(json_path, report.dump(2) + "\n");
    std::cout << "no CUDA device (" << report["reason"].get<std::string>() << "); wrote "
              << json_path << "\n";
    return 0;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  report["device"] = prop.name;
  report["repeats"] = repeats;
  std::cout << "ReLU compression on " << prop.name << ", " << n << " elements\n"
            << "sparsity  compress GB/s  decompress GB/s  memcpy GB/s\n";
  for (const double sparsity : {0.0, 0.5, 0.9}) {
    json r = measure(n, sparsity, repeats);
    std::cout << sparsity << "  " << r["compress_gbps"].get<double>() << "  "
              << r["decompress_gbps"].get<double>() << "  " << r["memcpy_gbps"].get<double>()
              << "\n";
    report["results"].push_back(std::move(r));
  }
  engram::write_file_atomically(json_path, report.dump(2) + "\n");
  std::cout << "wrote " << json_path << "\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "engram_relu_cuda_bench: error: " << e.what() << "\n";
    return 1;
  }
}
