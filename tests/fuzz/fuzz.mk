# Fuzzing of every loader a user can hand a file to (docs/fuzzing.md). Included by the
# top Makefile after its variables.
#
# A target is tests/fuzz/fuzz_<name>.c (defining LLVMFuzzerTestOneInput) with its seed
# corpus in tests/fuzz/corpus/<name>/ and optionally a dictionary tests/fuzz/<name>.dict;
# a new target is found by name. The library sources the targets need are FUZZ_LIB_SRCS:
# add a loader's file there.
#
#   make tests           also builds $(O)/tests/fuzz/replay_<name>: gcc, ASan + UBSan, a
#                        plain main() that runs the target on the committed corpus
#                        (tests/run.sh runs them, leak checking on)
#   make fuzz [FUZZ_SECONDS=600] [FUZZ_TARGETS=npy,csv]
#                        installs clang (scripts/install-deps.sh --fuzz), builds the
#                        libFuzzer binaries into build/fuzz/ and runs each target in turn
#   make fuzz-build      only builds them

FUZZ_NAMES := $(patsubst tests/fuzz/fuzz_%.c,%,$(wildcard tests/fuzz/fuzz_*.c))
FUZZ_LIB_SRCS := $(wildcard src/core/*.c src/io/*.c) src/comm/select.c \
                 src/nn/spec.c src/nn/model.c src/nn/conv_direct.c src/nn/modelfile.c src/nn/npz_model.c \
                 src/nn/data.c \
                 src/nn/checkpoint.c src/nn/optim.c
FUZZ_HELPER_SRCS := tests/fuzz/common.c
FUZZ_SECONDS ?= 600
FUZZ_TARGETS ?=

# ---- replay under gcc's sanitizers, part of `make tests` -------------------------------
# Own objects (not the library's): the replay always runs under ASan + UBSan, whatever
# SANITIZE says. UBSan findings abort, so they fail the test instead of scrolling by.
REPLAY_O := $(O)/fuzz-replay
REPLAY_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=undefined \
                -fno-omit-frame-pointer
REPLAY_LIB := $(REPLAY_O)/libhpml-replay.a
REPLAY_LIB_OBJS := $(FUZZ_LIB_SRCS:%.c=$(REPLAY_O)/%.o)
REPLAY_HELPER_OBJS := $(FUZZ_HELPER_SRCS:%.c=$(REPLAY_O)/%.o) $(REPLAY_O)/tests/fuzz/replay_main.o
REPLAY_BINS := $(FUZZ_NAMES:%=$(O)/tests/fuzz/replay_%)

tests: $(REPLAY_BINS)

$(REPLAY_O)/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) -Itests -O1 -g -fPIC -pthread $(WARN) $(BLAS_CFLAGS) $(REPLAY_FLAGS) \
	    -c $< -o $@

$(REPLAY_LIB): $(REPLAY_LIB_OBJS)
	rm -f $@
	ar rcs $@ $^

# --as-needed: the MPI library is not loaded (no target calls MPI), so LeakSanitizer sees
# only hpml's allocations.
$(O)/tests/fuzz/replay_%: $(REPLAY_O)/tests/fuzz/fuzz_%.o $(REPLAY_HELPER_OBJS) $(REPLAY_LIB)
	@mkdir -p $(@D)
	$(CC) -pthread $(REPLAY_FLAGS) -Wl,--as-needed -o $@ $< $(REPLAY_HELPER_OBJS) $(REPLAY_LIB) \
	    $(LDLIBS)

-include $(REPLAY_LIB_OBJS:.o=.d) $(REPLAY_HELPER_OBJS:.o=.d) \
         $(FUZZ_NAMES:%=$(REPLAY_O)/tests/fuzz/fuzz_%.d)

# ---- libFuzzer (clang), `make fuzz` --------------------------------------------------
# clang with the MPI headers of $(MPI) (select.c's internal header includes mpi.h; no
# MPI library is linked).
FUZZ_O := build/fuzz
FUZZ_CC := clang
FUZZ_MPI_CFLAGS := $(shell pkg-config --cflags $(if $(filter mpich,$(MPI)),mpich,ompi-c) \
                     2>/dev/null)
# The library's logging asks MPI whether it runs (MPI_Initialized) to name the rank, so the
# targets link the MPI library too; none of them initialises it.
FUZZ_MPI_LIBS := $(shell pkg-config --libs $(if $(filter mpich,$(MPI)),mpich,ompi-c) 2>/dev/null)
FUZZ_SAN := -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_CFLAGS := -O1 -g -fno-omit-frame-pointer -pthread $(WARN) -Wno-unknown-pragmas $(BLAS_CFLAGS) \
               $(FUZZ_MPI_CFLAGS) \
               $(FUZZ_SAN)
FUZZ_CPPFLAGS := $(filter-out -DHPML_BUILD_CC=%,$(CPPFLAGS)) -DHPML_BUILD_CC='"$(FUZZ_CC)"' \
                 -Itests
FUZZ_LIB := $(FUZZ_O)/libhpml-fuzz.a
FUZZ_LIB_OBJS := $(FUZZ_LIB_SRCS:%.c=$(FUZZ_O)/obj/%.o)
FUZZ_HELPER_OBJS := $(FUZZ_HELPER_SRCS:%.c=$(FUZZ_O)/obj/%.o)
FUZZ_BINS := $(FUZZ_NAMES:%=$(FUZZ_O)/fuzz_%)

.PHONY: fuzz fuzz-build fuzz-deps
fuzz-deps:
	scripts/install-deps.sh --fuzz

fuzz: fuzz-deps
	$(MAKE) -j$(NPROC) fuzz-build
	tests/fuzz/run.sh --seconds $(FUZZ_SECONDS) $(if $(FUZZ_TARGETS),--targets $(FUZZ_TARGETS))

fuzz-build: $(FUZZ_BINS)

# Coverage instrumentation everywhere (fuzzer-no-link); libFuzzer's main() only at the
# final link.
$(FUZZ_O)/obj/%.o: %.c
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CPPFLAGS) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -c $< -o $@

$(FUZZ_LIB): $(FUZZ_LIB_OBJS)
	rm -f $@
	ar rcs $@ $^

$(FUZZ_O)/fuzz_%: $(FUZZ_O)/obj/tests/fuzz/fuzz_%.o $(FUZZ_HELPER_OBJS) $(FUZZ_LIB)
	$(FUZZ_CC) -pthread -fsanitize=fuzzer $(FUZZ_SAN) -Wl,--as-needed -o $@ $< \
	    $(FUZZ_HELPER_OBJS) $(FUZZ_LIB) $(LDLIBS) $(FUZZ_MPI_LIBS)

-include $(FUZZ_LIB_OBJS:.o=.d) $(FUZZ_HELPER_OBJS:.o=.d) \
         $(FUZZ_NAMES:%=$(FUZZ_O)/obj/tests/fuzz/fuzz_%.d)
