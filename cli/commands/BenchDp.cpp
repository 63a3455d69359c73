// engram bench dp: data-parallel steps on several local ranks, every link speed and schedule,
// beside PyTorch DDP.
#include "bench/DpBench.h"
#include "cli/Command.h"
#include "cli/Flags.h"

#include <CLI/CLI.hpp>

#include <memory>

namespace engram::cli {

Command register_bench_dp(CLI::App& parent) {
  auto o = std::make_shared<bench::DpBenchOptions>();
  auto worker_options = std::make_shared<std::string>();
  CLI::App* sub = parent.add_subcommand(
      "dp",
      "Data-parallel training step on local ranks for every emulated (or, with --hosts netns, "
      "shaped) link speed and gradient "
      "schedule (none, after, overlap, ooo, host), beside PyTorch DDP");
  sub->add_option("--json", o->json_path, "Write the results here");
  sub->add_option("--ranks", o->ranks, "Processes (ranks) on this machine")->capture_default_str();
  sub->add_option("--models", o->models, "resnet (ResNet-18, CIFAR-sized), npi (addition)")
      ->delimiter(',')
      ->capture_default_str();
  sub->add_option("--links", o->link_bandwidths,
                  "Emulated link bandwidths in bytes/s, comma-separated; 0: loopback "
                  "(default: 0, 10 Gb/s, 1 Gb/s, 100 Mb/s)")
      ->delimiter(',');
  sub->add_option("--predict-link", o->predict_links,
                  "Link what-if: predict the step on these bandwidths (bytes/s, comma-separated) "
                  "from the --links measurements, then measure them and report the error")
      ->delimiter(',');
  sub->add_option("--link-latency", o->link_latency, "Emulated latency per collective, seconds")
      ->capture_default_str();
  sub->add_option("--hosts", o->hosts,
                  "loopback: ranks on 127.0.0.1, links emulated; netns: also each rank on a host "
                  "of its own (a network namespace, root only) with every link shaped by Linux "
                  "traffic control (tbf), one job per link, the DDP peer across the same hosts")
      ->capture_default_str();
  sub->add_option("--link-delay", o->link_delay,
                  "With --hosts netns: seconds each packet waits before its host's link (netem)")
      ->capture_default_str();
  sub->add_option("--schedules", o->schedules,
                  "Gradient schedules: none, after, overlap, ooo, host")
      ->delimiter(',')
      ->capture_default_str();
  add_chunk_flag(sub, o->chunk_layers,
                 "Layers per chunk of host, or auto (the default: searched on the first steps)");
  add_ooo_k_flag(sub, o->ooo_k,
                 "Layers ooo updates late, or auto (the default: chosen from the first step)");
  sub->add_option("--steps", o->steps, "Timed steps per configuration")->capture_default_str();
  sub->add_option("--warmup", o->warmup, "Untimed steps per configuration")->capture_default_str();
  sub->add_option("--resnet-batch", o->resnet_batch, "ResNet images per rank and step")
      ->capture_default_str();
  sub->add_option("--npi-batch", o->npi_batch, "NPI traces per rank and step")
      ->capture_default_str();
  sub->add_option("--hidden", o->hidden, "NPI LSTM width")->capture_default_str();
  sub->add_option("--threads", o->threads, "Intra-op threads per rank, Engram and DDP alike")
      ->capture_default_str();
  sub->add_option("--device", o->device,
                  "Where the ranks train, Engram's and DDP's: cpu, cuda (each rank the GPU of "
                  "its LOCAL_RANK) or cuda:N (one GPU shared, with --dist-backend gloo)")
      ->capture_default_str();
  sub->add_option("--dist-backend", o->dist_backend,
                  "auto (nccl with a GPU per rank, else gloo), gloo or nccl, Engram and DDP alike")
      ->check(CLI::IsMember({"auto", "gloo", "nccl"}))
      ->capture_default_str();
  sub->add_option("--seed", o->seed, "Random seed")->check(seed_check())->capture_default_str();
  sub->add_option("--bucket-mb", o->bucket_mb,
                  "Gradient bucket size in MiB, Engram and DDP (bucket_cap_mb) alike")
      ->capture_default_str();
  sub->add_option("--first-bucket-mb", o->first_bucket_mb,
                  "Engram's first bucket in MiB (DDP's is 1)")
      ->capture_default_str();
  sub->add_option("--trace", o->trace_dir,
                  "Write a Chrome trace per rank of each configuration's last step here");
  sub->add_option("--port", o->port,
                  "Rendezvous port on 127.0.0.1, the DDP peer's one above (0: free ones)")
      ->capture_default_str();
  sub->add_option("--python", o->python, "Interpreter with torch for the DDP peer")
      ->capture_default_str();
  sub->add_option("--torchrun", o->torchrun,
                  "torchrun for the DDP peer (default: $ENGRAM_TORCHRUN, else the one beside "
                  "--python, else --python -m torch.distributed.run)");
  sub->add_flag("--no-peer", o->skip_peer, "Measure Engram only");
  sub->add_option("--worker-options", *worker_options,
                  "(internal) run one rank on the driver's options")
      ->group("");
  return {sub,
          [o, worker_options](std::ostream& out, std::ostream&) {
            if (!worker_options->empty()) {
              bench::run_dp_worker_from(*worker_options, read_job_environment());
              return 0;
            }
            bench::run_dp_bench(*o, out);
            return 0;
          },
          {{"json_path", "--json"},
           {"ranks", "--ranks"},
           {"models", "--models"},
           {"link_bandwidths", "--links"},
           {"link_latency", "--link-latency"},
           {"hosts", "--hosts"},
           {"link_delay", "--link-delay"},
           {"predict_links", "--predict-link"},
           {"schedules", "--schedules"},
           {"steps", "--steps"},
           {"warmup", "--warmup"},
           {"resnet_batch", "--resnet-batch"},
           {"npi_batch", "--npi-batch"},
           {"hidden", "--hidden"},
           {"threads", "--threads"},
           {"device", "--device"},
           {"dist.backend", "--dist-backend"},
           {"bucket_mb", "--bucket-mb"},
           {"first_bucket_mb", "--first-bucket-mb"},
           {"port", "--port"},
           {"python", "--python"},
           {"torchrun", "--torchrun"}}};
}

}  // namespace engram::cli
