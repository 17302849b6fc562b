# The two commands of the README's quick start, plus the build they share.
#   make demo   install what is missing, build Release, train the default job, print a sample
#   make test   install what is missing, build, run every test through ctest
BUILD   ?= build
JOBS    ?= 2
CMAKE_FLAGS ?=
NPROC   ?= 2

.PHONY: all deps build demo test bench clean

all: build

deps:
	@scripts/install-deps.sh

$(BUILD)/CMakeCache.txt: | deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	$(BUILD)/ringmaster run configs/shakespeare.yaml --fresh --nproc $(NPROC)
	$(BUILD)/ringmaster sample runs/shakespeare --prompt "ROMEO:" --tokens 300 --temperature 0.8

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) $(CTEST_FLAGS)

clean:
	rm -rf $(BUILD)
