#pragma once
/// \file
/// Hosts made on this machine for `engram bench dp --hosts netns`: each host a Linux network
/// namespace with its own address on one interface, every host's interface a veth pair whose
/// other end is a port of a bridge in a namespace of its own (a switch), and each host's link
/// shaped by Linux traffic control: a token-bucket filter (tbf) at the link's rate, optionally
/// under a netem delay. The ranks then talk through the kernel's TCP stack, queues and
/// congestion control, as between machines, instead of loopback. Nothing is left in the
/// machine's own namespace: a second set of hosts (another run) has its own switch and may
/// reuse the same addresses.
///
/// The namespaces are removed whatever ends the run: a keeper process started with the hosts
/// waits for the owner to close a pipe (destruction, or the owner's death by any signal, even
/// SIGKILL), then kills every process left in them and deletes them. Namespaces a keeper could
/// not remove (the keeper killed too) are swept by the next run once their owner is gone.
/// Needs root and iproute2's `ip` and `tc`; Linux only, no torch.
///
/// \code
///   engram::bench::NetnsHosts::check_available();        // one line naming what is missing
///   engram::bench::NetnsHosts hosts(2);                  // 10.79.0.1, 10.79.0.2
///   hosts.shape({/*bandwidth=*/12.5e6, /*delay=*/0});    // 100 Mb/s from each host
///   auto argv = hosts.command_on(0, {"engram", "bench", "dp", "--worker-options", path});
/// \endcode

#include <cstdint>
#include <string>
#include <vector>

#include <sys/types.h>

namespace engram::bench {

/// What traffic control makes of each host's outgoing link.
struct LinkShape {
  double bandwidth = 0;  ///< bytes per second on the wire (Ethernet frames); 0: not shaped
  double delay = 0;      ///< seconds each packet is held before the link (netem); 0: none
};

/// The `tc` argument lists (without the leading "tc") that put `shape` on device `device`:
/// a tbf at the rate, under a netem qdisc when there is a delay; nothing for an unshaped link
/// (NetnsHosts::shape removes what was there first). The token bucket holds 1 ms of the rate,
/// never less than 128 KiB: a segmentation-offload packet (64 KiB of payload and its headers)
/// must fit in it, or tbf cuts it into MTU-sized packets, and the kernel's work per byte (which
/// runs on the ranks' cores) grows tenfold. After an idle moment the link sends one bucket at the
/// speed of memory, which matters only for transfers not much larger. Throws std::invalid_argument
/// for a negative or non-finite bandwidth or delay.
std::vector<std::vector<std::string>> shaper_commands(const std::string& device,
                                                      const LinkShape& shape);

/// The names in `ip netns list` output that belong to an owner process no longer alive: names
/// of the form egdpPID-..., where `alive(PID)` is false.
std::vector<std::string> stale_namespaces(const std::string& ip_netns_list, bool (*alive)(pid_t));

/// A set of hosts; not copyable or movable (the keeper holds their names).
class NetnsHosts {
 public:
  /// Throws std::runtime_error with one line saying what is missing: root (with CAP_SYS_ADMIN
  /// and CAP_NET_ADMIN), or `ip`/`tc` in PATH.
  static void check_available();

  /// Makes `count` hosts (1..200), addresses 10.79.0.1 up, unshaped. Sweeps stale namespaces
  /// first. Throws std::runtime_error naming the command that failed (what was made is removed).
  explicit NetnsHosts(int count);
  /// Removes every namespace (and so every interface) of these hosts, killing what still runs
  /// in them.
  ~NetnsHosts();
  NetnsHosts(const NetnsHosts&) = delete;
  NetnsHosts& operator=(const NetnsHosts&) = delete;

  int count() const { return count_; }
  /// Host `host`'s namespace, address and interface (the name GLOO_SOCKET_IFNAME takes).
  std::string namespace_of(int host) const;
  std::string address_of(int host) const;
  std::string interface_of(int host) const;
  /// `argv` run on host `host`: `ip netns exec NAMESPACE argv...` (the process keeps its pid).
  std::vector<std::string> command_on(int host, const std::vector<std::string>& argv) const;

  /// Shapes every host's outgoing link (what it sends into the switch). Throws
  /// std::runtime_error naming the `tc` command that failed.
  void shape(const LinkShape& shape);
  /// Bytes host `host`'s interface has sent so far, frames and headers included (the kernel's
  /// counter, which the shaper's rate limits).
  std::uint64_t sent_bytes(int host) const;

 private:
  void start_keeper();
  /// Closes the keeper's pipe and waits (up to a minute) for it to remove the hosts.
  void release();
  std::string tag_;
  int count_ = 0;
  std::vector<std::string> namespaces_;  ///< the hosts', then the switch's
  int keeper_pipe_ = -1;                 ///< its write end; closing it removes the hosts
  pid_t keeper_ = -1;
};

}  // namespace engram::bench
