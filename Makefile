# The two commands of the README's quick start, plus the build they share.
#   make demo   install what is missing, build Release, train the default job, print a sample
#   make test   install what is missing, build, run every test through ctest
#   make fuzz      build the libFuzzer targets with clang, run each FUZZ_SECONDS (scripts/fuzz.sh)
#   make sanitize  ASan+UBSan and TSan builds, a subset of the tests under each (scripts/sanitize.sh)
BUILD   ?= build
JOBS    ?= 2
CMAKE_FLAGS ?=
NPROC   ?= 2
FUZZ_SECONDS ?= 60
SANITIZE ?= all

.PHONY: all deps build demo test fuzz sanitize bench clean

all: build

deps:
	@scripts/install-deps.sh

# Configures $(BUILD) once; later runs keep its cache (and CMAKE_FLAGS given then). Each library
# is compiled as one unit (RM_UNITY_LIBS, CMakeLists.txt), and with Ninja (installed by deps),
# which unlike CMake's Makefiles compiles a library's sources before the libraries it links are
# built: from scratch the binary alone took 2m26 as before, 1m33 with one unit per library, 1m10
# with Ninja too (2 cores). A build directory of your own, configured without these, recompiles
# only the file you edit. The generator is chosen when the recipe runs, after deps installed it.
cmake_fresh = cmake -S . -B $(BUILD) $$(command -v ninja >/dev/null && echo -GNinja) \
  -DCMAKE_BUILD_TYPE=Release -DRM_UNITY_LIBS=ON
configure = test -f $(BUILD)/CMakeCache.txt || $(cmake_fresh) $(CMAKE_FLAGS)

build: deps
	@$(configure)
	cmake --build $(BUILD) -j $(JOBS)

# The binary alone, not the tests: a fresh machine's first run is the build plus the training.
# Without a GPU (nvidia-smi lists none) a build it configures leaves CUDA out: its kernels could
# not run here, and compiling them is most of a fresh build wherever nvcc is installed.
demo_cuda = $(if $(shell nvidia-smi -L 2>/dev/null | grep '^GPU'),,-DRM_WITH_CUDA=OFF)
demo:
	@scripts/install-deps.sh demo
	@test -f $(BUILD)/CMakeCache.txt || $(cmake_fresh) $(demo_cuda) $(CMAKE_FLAGS)
	cmake --build $(BUILD) --target ringmaster -j $(JOBS)
	$(BUILD)/ringmaster run configs/shakespeare.yaml --fresh --nproc $(NPROC)
	$(BUILD)/ringmaster sample runs/shakespeare --prompt "ROMEO:" --tokens 300 --temperature 0.8

# The tests run JOBS at a time, most of them starting 2-4 MPI ranks: more ranks than cores, which
# Open MPI cannot see (each mpirun counts only its own), so a rank waiting inside MPI would spin
# out its time slice while the rank it waits for has no core. Yielding when idle (what Open MPI
# does by itself where it sees a host oversubscribed) took ctest -j2 from 675 to 586 s on 2
# cores, the most in the multi-host tests (tests/cluster/cluster.sh sets it too). It changes no
# result: only how an idle rank waits.
# The same for OpenMP's threads: a rank's team (cores / ranks) spins at each barrier for the
# thread that another test holds the core of; passive waits sleep instead. Measured on 2 cores,
# ctest -j2: 52 of the training CLI tests 101 -> 66 s; a 100-step run of a small model (1 rank,
# 2 threads) beside one busy process 4.5 -> 0.9 s (0.7 s with the machine to itself). A run of
# your own keeps OpenMP's default, the faster one on cores it has to itself.
test_env = OMPI_MCA_mpi_yield_when_idle=1 OMP_WAIT_POLICY=passive
test: build
	cd $(BUILD) && $(test_env) ctest --output-on-failure -j $(JOBS) $(CTEST_FLAGS)

fuzz: deps
	RM_FUZZ_SECONDS=$(FUZZ_SECONDS) RM_FUZZ_JOBS=$(JOBS) scripts/fuzz.sh

sanitize: deps
	CMAKE_FLAGS="$(CMAKE_FLAGS)" JOBS=$(JOBS) scripts/sanitize.sh $(SANITIZE)

clean:
	rm -rf $(BUILD)
