// A cluster file for `ringmaster plan --cluster FILE`: what the planner needs to know of the
// machines a job would run on. YAML, every key required unless a default is given:
//
//   name: "8 x 8 H100 SXM, 400 Gb/s InfiniBand per GPU"
//   nodes: 8
//   devices_per_node: 8              # ranks per node (GPUs, or CPU ranks)
//   device:
//     type: gpu                      # gpu | cpu
//     name: H100 SXM
//     tflops: 989                    # dense peak per device, in the job's precision
//     mfu: 0.45                      # fraction of it a training step achieves
//     memory_gib: 80                 # per device (gpu); ignored for cpu (node_memory_gib)
//   node_memory_gib: 2048            # host RAM per node
//   intra_node: {bandwidth_gbs: 450, latency_us: 3}   # per rank, within a node (GB/s)
//   inter_node: {bandwidth_gbs: 400, latency_us: 5}   # per node, to the other nodes (GB/s)
//   filesystem: {write_gbs: 20}      # checkpoint writes, all nodes together
//   node_mtbf_hours: 5000            # mean time between failures of one node
//
// cpu devices move communicated bytes with the cores that compute (no copy engine, no spare
// core on our machines), so the planner overlaps nothing there; gpu devices overlap
// communication with the backward pass (and ZeRO-3's gathers with both passes).
#pragma once

#include <string>

namespace rm {

struct LinkSpec {
  double bandwidth_gbs = 0;  // GB/s (1e9 bytes)
  double latency_us = 0;
};

struct ClusterSpec {
  std::string name;
  int nodes = 1;
  int devices_per_node = 1;
  std::string device_type = "cpu";  // cpu | gpu
  std::string device_name;
  double tflops = 0;
  double mfu = 0.5;
  double device_memory_gib = 0;
  double node_memory_gib = 0;
  LinkSpec intra_node, inter_node;
  double fs_write_gbs = 0;
  double node_mtbf_hours = 0;
  int ranks() const { return nodes * devices_per_node; }
};

// Throws JobConfigError naming the file, line and key of every problem (missing, unknown, not a
// positive number), all at once.
ClusterSpec read_cluster_file(const std::string& path);

}  // namespace rm
