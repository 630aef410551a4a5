# histeq_dist — one Makefile for the C11 host code, the CUDA engine, the tests and the benchmarks.
#
#   make            build build/histeq_dist (with the GPU engine when nvcc is found)
#   make test       unit tests (cmocka) + integration tests under mpirun (pytest) + test-slurm
#   make test-slurm the slurm/ batch scripts on a one-node SLURM started by the test (needs root)
#   make test-asan  the same tests against a build with -fsanitize=address,undefined
#   make fuzz       the PNG and HDF5 readers fuzzed, FUZZ_SECONDS (60) each (clang 14 + libFuzzer)
#   make fuzz-regress  every fuzz seed and kept crash input replayed under ASan/UBSan (gcc; in `test`)
#   make test-gpu   the integration suite on --device gpu and --device cpu, outputs compared (needs a GPU)
#   make demo       a low-contrast phantom stack equalized with mpirun -np 2
#   make deps       install the Debian packages the build and the tests need (as root)
#   make install    PREFIX (/usr/local): bin/histeq_dist, share/man/man1/histeq_dist.1 (made from
#                   the --help text), share/histeq_dist/*.sbatch; DESTDIR is honoured
#   make uninstall  removes exactly those files

VERSION   := 0.1.0
BUILD     ?= build
CC        := mpicc
PKGS      := hdf5-openmpi libpng
PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
PKG_LIBS   := $(shell pkg-config --libs $(PKGS) 2>/dev/null || echo -lhdf5 -lpng16)
OPT       ?= -O3
CFLAGS    ?= $(OPT) -g
# -ffp-contract=off: no fused multiply-add anywhere on the host, so float arithmetic that the GPU
# repeats (core/fbin.h) rounds each operation as written, whatever -march allows, and CLAHE's
# (core/clahe.h) as OpenCV's does.
CFLAGS    += -ffp-contract=off -std=c11 -Wall -Wextra -Wshadow -Wno-unknown-pragmas -D_POSIX_C_SOURCE=200809L -fopenmp \
             -DHQ_VERSION=\"$(VERSION)\" $(PKG_CFLAGS) $(SAN)
# libdeflate (Debian: libdeflate-dev) inflates and deflates HDF5 chunks on the backend's workers, 2-3x
# faster than zlib; without it zlib does (DEFLATE=0 forces that).
DEFLATE   ?= $(shell echo '\#include <libdeflate.h>' | $(CC) -E - >/dev/null 2>&1 && echo 1 || echo 0)
DEFLATE_CFLAGS := $(if $(filter 1,$(DEFLATE)),-DHQ_HAVE_LIBDEFLATE)
DEFLATE_LIBS   := $(if $(filter 1,$(DEFLATE)),-ldeflate) -lz
# ISA-L (Debian: libisal-dev) deflates level-1 HDF5 chunks twice as fast as libdeflate (io/hdf5/codec.c
# says where it stops); ISAL=0 leaves it out.
ISAL      ?= $(shell echo '\#include <isa-l/igzip_lib.h>' | $(CC) -E - >/dev/null 2>&1 && echo 1 || echo 0)
DEFLATE_CFLAGS += $(if $(filter 1,$(ISAL)),-DHQ_HAVE_ISAL)
DEFLATE_LIBS   := $(if $(filter 1,$(ISAL)),-lisal) $(DEFLATE_LIBS)
# libaec's szip interface (Debian: libaec-dev, which libhdf5-dev brings) tells an szip chunk from
# one stored uncoded under a wrong filter mask (io/hdf5/szip_masks.c); SZIP=0 leaves it out.
SZIP      ?= $(shell echo '\#include <szlib.h>' | $(CC) -E - >/dev/null 2>&1 && echo 1 || echo 0)
DEFLATE_CFLAGS += $(if $(filter 1,$(SZIP)),-DHQ_HAVE_SZLIB)
DEFLATE_LIBS   := $(if $(filter 1,$(SZIP)),-lsz) $(DEFLATE_LIBS)
CFLAGS    += $(DEFLATE_CFLAGS)
LDLIBS    += $(PKG_LIBS) $(DEFLATE_LIBS) -lm
LDFLAGS   += -fopenmp $(SAN)

# The GPU engine is built whenever nvcc is there (CI has nvcc but no GPU); CUDA=0 turns it off.
NVCC      ?= $(shell command -v nvcc 2>/dev/null || ls /usr/local/cuda/bin/nvcc 2>/dev/null)
CUDA      ?= $(if $(NVCC),1,0)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
CUDA_ARCH ?= -arch=sm_90
NVCCFLAGS ?= -O3 -std=c++17 $(CUDA_ARCH) -lineinfo -Xcompiler -Wall,-Wextra,-fPIC,-fopenmp

HOST_SRC  := $(wildcard core/*.c engine/*.c engine/cpu/*.c io/*.c io/hdf5/*.c io/png/*.c jobs/*.c jobs/journal/*.c mpi/*.c \
                       app/*.c app/run/*.c report/*.c)
ifeq ($(CUDA),1)
GPU_SRC   := $(wildcard gpu/*.cu)
GPU_OBJ   := $(GPU_SRC:%.cu=$(BUILD)/%.o)
CUDA_LIBS := -L$(CUDA_HOME)/lib64 -L$(CUDA_HOME)/targets/x86_64-linux/lib -lcudart_static -ldl -lrt -lpthread -lstdc++
LDLIBS    += $(CUDA_LIBS)
else
HOST_SRC  += gpu/gpu_none.c
endif
HOST_OBJ  := $(HOST_SRC:%.c=$(BUILD)/%.o)
# The CPU engine with what it stands on, for the harnesses and benchmarks that link it without the app.
CPU_ENGINE_OBJ := $(addprefix $(BUILD)/,core/error.o core/lut.o core/clahe.o engine/block_pool.o) \
                  $(patsubst %.c,$(BUILD)/%.o,$(wildcard engine/cpu/*.c))
LIB_OBJ   := $(filter-out $(BUILD)/app/main.o,$(HOST_OBJ)) $(GPU_OBJ)
BIN       := $(BUILD)/histeq_dist
MAN       := $(BUILD)/histeq_dist.1
PREFIX    ?= /usr/local
SLURM_SCRIPTS := $(wildcard slurm/*.sbatch)

UNIT_SRC  := $(wildcard tests/unit/test_*.c)
UNIT_BIN  := $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/%)

.PHONY: all man install uninstall test unit integration test-slurm test-asan test-gpu gpu-check demo deps bench clean fuzz fuzz-regress
all: $(BIN) $(MAN)

$(BIN): $(HOST_OBJ) $(GPU_OBJ)
	$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/gpu/%.o: gpu/%.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -MMD -MP -c $< -o $@

# The float path spells its roundings out (__dsub_rn, __dmul_rn, __ddiv_rn: core/fbin.h); no
# contraction anywhere else in it either, so it matches the host's -ffp-contract=off.
$(BUILD)/gpu/gpu_float.o: NVCCFLAGS += -fmad=false

# The man page is the --help text (app/options.c) set in roff by man/usage2man.awk: one source.
$(BUILD)/man/print_usage: man/print_usage.c $(BUILD)/app/options.o $(BUILD)/core/error.o
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS)
$(MAN): $(BUILD)/man/print_usage man/usage2man.awk
	$(BUILD)/man/print_usage | awk -v version=$(VERSION) -f man/usage2man.awk > $@.tmp && mv $@.tmp $@
man: $(MAN)

install: $(BIN) $(MAN)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/histeq_dist
	install -m 755 $(BIN) $(DESTDIR)$(PREFIX)/bin/histeq_dist
	install -m 644 $(MAN) $(DESTDIR)$(PREFIX)/share/man/man1/histeq_dist.1
	install -m 755 $(SLURM_SCRIPTS) $(DESTDIR)$(PREFIX)/share/histeq_dist/

# Removes what install put there, and share/histeq_dist/ when nothing else is left in it; the
# standard directories (bin, share/man/man1) stay.
uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/histeq_dist $(DESTDIR)$(PREFIX)/share/man/man1/histeq_dist.1 \
	      $(addprefix $(DESTDIR)$(PREFIX)/share/histeq_dist/,$(notdir $(SLURM_SCRIPTS)))
	if [ -d $(DESTDIR)$(PREFIX)/share/histeq_dist ]; then \
	    rmdir --ignore-fail-on-non-empty $(DESTDIR)$(PREFIX)/share/histeq_dist; fi

$(BUILD)/tests/%: tests/unit/%.c $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(LIB_OBJ) $(LDFLAGS) $(LDLIBS) -lcmocka

PYTEST    ?= /usr/bin/python3 -m pytest
MPIRUN_FLAGS ?= --oversubscribe $(if $(filter 0,$(shell id -u)),--allow-run-as-root)
export HQ_BIN = $(abspath $(BIN))
export HQ_MPIRUN_FLAGS = $(MPIRUN_FLAGS)

unit: $(UNIT_BIN)
	@set -e; for t in $(UNIT_BIN); do echo "== $$t"; $$t; done

integration: $(BIN)
	$(PYTEST) -q $(PYTEST_ARGS) tests/integration

# The SLURM test starts munged, slurmctld and slurmd itself, so it needs root (as in CI); a
# developer's `make test` without root says it left it out.
test: unit integration fuzz-regress
	@if [ "$$(id -u)" = 0 ]; then $(MAKE) --no-print-directory test-slurm; \
	 else echo "== test-slurm left out: it needs root (sudo make test-slurm)"; fi

test-slurm: $(BIN)
	timeout -k 15 300 bash tests/slurm/run_slurm_test.sh

# Leaks are checked in the unit tests; under mpirun, Open MPI's own allocations drown LeakSanitizer
# (it crashes tracing them), so the integration run checks memory errors and undefined behaviour only.
# test_docs is left out there: it runs the documents' commands against a plain build (they build
# benchmarks from its objects with the plain flags), which `make test` does.
ASAN_MAKE = $(MAKE) BUILD=build-asan OPT=-O1 CUDA=0 SAN="-fsanitize=address,undefined -fno-omit-frame-pointer"
test-asan:
	ASAN_OPTIONS=detect_leaks=1:halt_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 $(ASAN_MAKE) unit
	ASAN_OPTIONS=detect_leaks=0:halt_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 $(ASAN_MAKE) integration \
	    PYTEST_ARGS=--ignore=tests/integration/test_docs.py

test-gpu: $(BIN)
	HQ_DEVICES="cpu gpu" $(PYTEST) -q tests/integration

demo: $(BIN)
	sh tests/demo.sh $(BIN)

deps:
	sh .ci/deps.sh

# GPU engine against the CPU engine, every mode, on random data (needs a GPU).
$(BUILD)/tests/gpu_equal: tests/gpu/gpu_equal.c $(CPU_ENGINE_OBJ) $(GPU_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $^ $(LDFLAGS) $(LDLIBS)
gpu-check: $(BUILD)/tests/gpu_equal
	$<

# GPU kernels against NPP on device-resident images (bench/device_run.sh builds it on the GPU machine,
# where NPP is: GPU_BENCH_NPP=-DHQ_WITH_NPP and NPP_LIBS name what that machine's NPP offers).
GPU_BENCH_NPP ?=
NPP_LIBS      ?=
$(BUILD)/bench/gpu_bench: bench/gpu_bench.cu $(CPU_ENGINE_OBJ) $(GPU_OBJ)
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) $(GPU_BENCH_NPP) -c $< -o $@.o
	g++ -fopenmp -o $@ $@.o $(CPU_ENGINE_OBJ) $(GPU_OBJ) $(NPP_LIBS) $(CUDA_LIBS) -lm

# The 8-bit CLAHE histogram's floor on the device: its reads alone against its counting (no OpenCV).
$(BUILD)/bench/clahe_hist_floor: bench/clahe_hist_floor.cu
	@mkdir -p $(dir $@)
	$(NVCC) -O3 -std=c++17 $(CUDA_ARCH) -o $@ $<

# Benchmarks (bench/README.md): CPU engine and PNG codec beside OpenCV here; the GPU ones run on a
# GPU machine through bench/device_run.sh and bench/device_full.sh.
OPENCV = $$(pkg-config --cflags --libs opencv4)
$(BUILD)/bench/cpu_bench: bench/cpu_bench.cpp $(CPU_ENGINE_OBJ)
	@mkdir -p $(dir $@)
	g++ -O2 -std=c++17 -fopenmp -I. -o $@ $^ $(OPENCV)
$(BUILD)/bench/clahe_bench: bench/clahe_bench.cpp bench/clahe_image.h $(CPU_ENGINE_OBJ)
	@mkdir -p $(dir $@)
	g++ -O2 -std=c++17 -fopenmp -I. -o $@ $(filter-out %.h,$^) $(OPENCV)
$(BUILD)/bench/png_bench: bench/png_bench.cpp $(BUILD)/io/png/codec.o $(BUILD)/io/png/fast.o $(BUILD)/io/png/format.o \
                           $(BUILD)/io/zfast.o $(BUILD)/core/error.o
	@mkdir -p $(dir $@)
	g++ -O2 -std=c++17 -I. -o $@ $^ $(OPENCV) $$(pkg-config --cflags --libs libpng zlib) $(DEFLATE_LIBS)
bench: $(BUILD)/bench/cpu_bench $(BUILD)/bench/png_bench $(BUILD)/bench/clahe_bench
	$(BUILD)/bench/cpu_bench
	$(BUILD)/bench/clahe_bench
	$(BUILD)/bench/png_bench 5

# Fuzzing (fuzz/README.md). `fuzz` builds the libFuzzer harnesses with clang and runs each for
# FUZZ_SECONDS, one process at a time (-fork=1: a crash inside libhdf5 ends a job, not the run), on a
# corpus kept in build-fuzz/corpus, started from the seeds and the kept inputs. What crashed, hung or
# ran out of memory is then sorted by fuzz/triage.py; it fails when any fault is in our code.
# `fuzz-regress` needs no clang: the same harnesses with a plain main(), built by mpicc with
# ASan/UBSan, run every seed and every kept input once.
FUZZ_SECONDS ?= 60
FUZZ_PYTHON  ?= /usr/bin/python3
FUZZ_CC      ?= clang-14
FUZZ_BUILD   := build-fuzz
FUZZ_TARGETS := png hdf5
FUZZ_LIB_SRC := $(wildcard io/*.c io/hdf5/*.c io/png/*.c) core/error.c core/clahe.c core/fdio.c core/doomed.c core/samepath.c jobs/plan.c
FUZZ_OBJ     := $(FUZZ_LIB_SRC:%.c=$(FUZZ_BUILD)/obj/%.o) $(FUZZ_BUILD)/obj/fuzz/harness.o
FUZZ_CFLAGS  := -O1 -g -std=c11 -Wall -Wextra -D_POSIX_C_SOURCE=200809L -DHQ_VERSION=\"$(VERSION)\" \
                -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined \
                $(shell mpicc --showme:compile 2>/dev/null) $(PKG_CFLAGS) $(DEFLATE_CFLAGS)
FUZZ_LIBS    := $(PKG_LIBS) $(shell mpicc --showme:link 2>/dev/null) $(DEFLATE_LIBS) -lm
# Open MPI's and HDF5's own allocations at start-up are not ours to fix (fuzz/lsan.supp). Leaks are
# checked after each input, not at exit, and thread-local storage is not scanned: LeakSanitizer's
# tracer crashes on that of Open MPI's threads. malloc returns NULL for absurd sizes, as glibc's
# does. A singleton MPI run as root (CI containers) must be allowed explicitly.
FUZZ_ENV     := ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:abort_on_error=1:allocator_may_return_null=1 \
                LSAN_OPTIONS=suppressions=$(CURDIR)/fuzz/lsan.supp:print_suppressions=0:leak_check_at_exit=0:use_tls=0 \
                UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
                OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none \
                HQ_METADATA_TIMEOUT_S=20

$(FUZZ_BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -MMD -MP -c $< -o $@
# The harness scans in process under libFuzzer, where the scan's coverage is seen (its replay, built
# without HQ_LIBFUZZER, scans in a child as histeq_dist does).
$(FUZZ_BUILD)/obj/fuzz/harness.o: fuzz/harness.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -DHQ_LIBFUZZER -MMD -MP -c $< -o $@
.SECONDARY: $(FUZZ_OBJ)
$(FUZZ_BUILD)/fuzz_%: fuzz/fuzz_%.c $(FUZZ_OBJ)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -DHQ_LIBFUZZER -fsanitize=fuzzer -o $@ $^ $(FUZZ_LIBS)

fuzz: $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/fuzz_%)
	@status=0; for t in $(FUZZ_TARGETS); do \
	    art=$(FUZZ_BUILD)/artifacts/$$t; log=$(FUZZ_BUILD)/fuzz_$$t.log; \
	    rm -rf $$art; mkdir -p $(FUZZ_BUILD)/corpus/$$t $$art; \
	    echo "== fuzz_$$t, $(FUZZ_SECONDS) s (log: $$log)"; \
	    $(FUZZ_ENV) $(FUZZ_BUILD)/fuzz_$$t -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
	        -max_total_time=$(FUZZ_SECONDS) -timeout=30 -rss_limit_mb=2048 -malloc_limit_mb=1024 -max_len=65536 \
	        -artifact_prefix=$$art/ $(FUZZ_BUILD)/corpus/$$t fuzz/seeds/$$t fuzz/regress/$$t >$$log 2>&1 \
	        || { tail -n 20 $$log; status=1; }; \
	    grep '^#[0-9]' $$log | tail -n 1; \
	    $(FUZZ_PYTHON) fuzz/triage.py $(FUZZ_BUILD)/fuzz_$$t $$art || status=1; \
	done; exit $$status

# The replay binaries live in the ASan build tree, built by the same recursive make as test-asan.
# Then the inputs that crash or hang libhdf5 itself (regress/hdf5/lib-*) through the whole program:
# exit 4 and one line naming the file (fuzz/replay_library_faults.sh).
fuzz-regress:
	$(ASAN_MAKE) $(FUZZ_TARGETS:%=build-asan/fuzz/replay_%) build-asan/histeq_dist
	@set -e; for t in $(FUZZ_TARGETS); do \
	    echo "== replay_$$t"; \
	    log=build-asan/fuzz/replay_$$t.log; \
	    $(FUZZ_ENV) timeout 900 build-asan/fuzz/replay_$$t fuzz/seeds/$$t fuzz/regress/$$t >$$log 2>&1 \
	        || { tail -n 60 $$log; echo "replay_$$t FAILED (whole log: $$log)"; exit 1; }; \
	    tail -n 1 $$log; \
	done
	@echo "== library faults through histeq_dist"
	@$(FUZZ_ENV) timeout 600 sh fuzz/replay_library_faults.sh build-asan/histeq_dist fuzz/regress/hdf5/lib-*.h5

$(BUILD)/fuzz/replay_%: fuzz/fuzz_%.c fuzz/harness.c fuzz/replay.c fuzz/harness.h $(LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ fuzz/fuzz_$*.c fuzz/harness.c fuzz/replay.c $(LIB_OBJ) $(LDFLAGS) $(LDLIBS)

clean:
	rm -rf build build-asan build-fuzz

-include $(shell find $(BUILD) $(FUZZ_BUILD) -name '*.d' 2>/dev/null)
