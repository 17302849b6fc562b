// A fresh Open MPI session-directory base for every mpirun this binary starts.
//
// Open MPI 4 keeps a launch's session directory (PMIx stores, shared-memory backing files, the
// debugger fifo) at <orte_tmpdir_base>/ompi.<host>.<uid>/pid.<mpirun pid>, and the level above
// the pid, ompi.<host>.<uid>, is shared by every launch of the user on that host. A launch that
// ends removes that shared level once it is empty -- which can be just after the next launch's
// daemon found it and just before it creates its own subdirectory inside: the new launch fails
// with "A call to mkdir was unable to create the desired directory" (open-mpi/ompi#8510).
// Back-to-back launches are what a supervised restart does (mpirun again right after the failed
// one) and what the tests do. So each mpirun gets a base of its own,
// <TMPDIR or /tmp>/rm-mpi.<uid>/<launcher pid>.<n>: Open MPI creates it on every host and
// removes what it put inside; the emptied base is removed on this host when mpirun ends
// (run_mpirun, mpi_launch.h) and on the other hosts by the next job's first rank there
// (sweep_mpi_session_bases).
#pragma once

#include <string>

namespace rm {

// <TMPDIR or /tmp>/rm-mpi.<uid>: where this user's bases live, on every host.
std::string mpi_session_parent();

// A path under mpi_session_parent() no other launch uses (this process's pid and a count); not
// created here (Open MPI creates it), but marked: a file BASE.launcher beside it names this
// host, its boot and this process's pid namespace. Empty when the user chose a base of their own
// (OMPI_MCA_orte_tmpdir_base set): theirs is kept.
std::string new_mpi_session_base();

// Removes `base`, its marker and whatever a killed launch left inside it, once its mpirun has
// ended. Errors are ignored: a leftover directory is untidy, not wrong.
void remove_mpi_session_base(const std::string& base);

// Removes the bases under `parent` that a launcher on this host, boot and pid namespace made
// (their markers say so,
// written min_age_s or more ago) and then left behind, killed before it could remove them:
// the launcher (the pid the base is named by) is gone, and so is every mpirun whose session
// directory is inside (ompi.*/pid.N). 8 MiB each were left in /tmp. Returns how many.
int sweep_killed_launch_bases(const std::string& parent, double min_age_s);

// How long ago a base must have been emptied to be taken as an ended launch's (the sweeps).
inline constexpr double kEndedSessionBaseAgeS = 60;

// Removes every entry of `parent` that is an empty directory untouched for min_age_s seconds or
// more: the bases of launches that have ended (a live launch's base holds its session
// directory from the moment it is created; an ended one's was emptied when it ended). A
// directory that is not empty, or another launch's young one, is left alone. Returns how many
// were removed; a missing parent removes nothing.
int sweep_mpi_session_bases(const std::string& parent, double min_age_s);

// In a rank started by run_mpirun: sweeps the parent of this launch's base
// (OMPI_MCA_orte_tmpdir_base) if it is one of ours (named like mpi_session_parent()), so that
// every host's ended bases are removed by the next launch there. Does nothing in other ranks.
void sweep_mpi_session_bases_from_rank();

}  // namespace rm
