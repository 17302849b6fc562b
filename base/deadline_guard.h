// The never-hang rule for the few blocking calls nothing else can bound: MPI_Init (it waits for
// the launcher's other processes) and MPI_Finalize (it may wait for peers). A guard armed around
// such a call ends the process if the call has not returned by the deadline, after printing what
// it was waiting for -- so a rank that never started, or a peer that died during shutdown, costs
// a job its deadline and a message, not an allocation held until the Slurm time limit.
//
//   { DeadlineGuard guard(600, "MPI_Init", "a launched process never started");
//     MPI_Init_thread(...); }   // returned in time: the guard disarms on destruction
//
// On expiry: "ringmaster: [pid P on HOST] MPI_Init did not return within 600 s (a launched
// process never started); ending this process" on stderr, then _exit(exit_code) -- no exit
// handlers, no destructors, which could block on the same stuck library.
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace rm {

class DeadlineGuard {
 public:
  DeadlineGuard(double seconds, std::string what, std::string likely_cause, int exit_code = 1);
  ~DeadlineGuard();  // disarms and joins the watching thread
  DeadlineGuard(const DeadlineGuard&) = delete;
  DeadlineGuard& operator=(const DeadlineGuard&) = delete;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool disarmed_ = false;
  std::thread watcher_;
};

}  // namespace rm
