# hpml — plain, non-recursive GNU Makefile.
#
#   make [MPI=openmpi|mpich]       library, hpml binary and test programs into build/$(MPI)
#   make test                      install deps, build and run every test on both MPIs, and
#                                  the unit and MPI tests on an Open MPI sanitizer build
#   make demo                      install deps, build and run the main job
#   make SANITIZE=address,undefined   sanitizer build (separate build folder)
#   make test-san                  the suite on sanitizer builds of both MPIs
#   make fuzz [FUZZ_SECONDS=600] [FUZZ_TARGETS=npy,csv]   libFuzzer on every file loader
#                                  (tests/fuzz/fuzz.mk, docs/fuzzing.md)
#   make WERROR=1                  warnings are errors (CI)
#   make install PREFIX=/usr/local DESTDIR=...   /   make uninstall   (per MPI: see below;
#                                  the Python package goes to $(PYDIR), beside lib/)
#   make examples                  build examples/*.c against build/$(MPI)
#   make format-check / make format
#   make vec-report                show which loops of the reduction kernels vectorise
#
# Each layer lists its sources in src/<layer>/module.mk; objects go under $(O).

MPI ?= openmpi
ifeq ($(filter $(MPI),openmpi mpich),)
$(error MPI must be openmpi or mpich (got '$(MPI)'))
endif

CC := mpicc.$(MPI)
MPIRUN := mpirun.$(MPI)
SANITIZE ?=
O ?= build/$(MPI)$(if $(SANITIZE),-san)
PREFIX ?= /usr/local
DESTDIR ?=
OPT ?= -O3

NPROC := $(shell nproc 2>/dev/null || echo 2)
# The Python package (python/hpml) is installed for Debian's python3, in the
# dist-packages folder of $(PREFIX)/lib, where it finds $(PREFIX)/lib/libhpml.so.0.
PYTHON ?= /usr/bin/python3
PYVER := $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
PYDIR ?= $(PREFIX)/lib/python$(PYVER)/dist-packages
# hpml._fast, the package's compiled hot path (python/hpml/_fast.c; needs python3-dev and
# NumPy's C headers, which python3-numpy ships; built only when both are found),
# goes to $(O)/python/hpml, where the package finds it beside lib/. Not in sanitizer
# builds (python3 would have to preload the sanitizer runtimes).
PYCC ?= cc
PYEXT := $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))' 2>/dev/null)
PYINC := $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null)
NPINC := $(shell $(PYTHON) -c 'import numpy; print(numpy.get_include())' 2>/dev/null)
VERSION := 0.1.0
SOMAJOR := 0

WARN := -std=c11 -Wall -Wextra -Wpedantic -Wshadow -Wstrict-prototypes \
        -Wmissing-prototypes -Wformat=2 -Wvla
# CI sets CI=true: warnings are errors there.
ifeq ($(CI),true)
WERROR ?= 1
endif
ifneq ($(WERROR),)
WARN += -Werror
endif

BLAS_CFLAGS := $(shell pkg-config --cflags openblas lapacke 2>/dev/null)
BLAS_LIBS := $(shell pkg-config --libs openblas lapacke 2>/dev/null || echo -lopenblas -llapacke)
CMOCKA_LIBS := $(shell pkg-config --libs cmocka 2>/dev/null || echo -lcmocka)

SAN_FLAGS := $(if $(SANITIZE),-fsanitize=$(SANITIZE) -fno-omit-frame-pointer)

CPPFLAGS := -Iinclude -Isrc -D_GNU_SOURCE -MMD -MP \
            -DHPML_BUILD_MPI='"$(MPI)"' -DHPML_BUILD_CC='"$(CC)"' \
            -DHPML_BUILD_OPT='"$(OPT)$(if $(SANITIZE), sanitize=$(SANITIZE))"'
CFLAGS := $(OPT) -g -fPIC -pthread $(WARN) $(BLAS_CFLAGS) $(SAN_FLAGS)
LDFLAGS := -pthread $(SAN_FLAGS)
LDLIBS := $(BLAS_LIBS) -lz -lm

LIB_SRCS :=
TOOL_SRCS :=
include src/core/module.mk
-include src/comm/module.mk
-include src/io/module.mk
-include src/ml/module.mk
-include src/nn/module.mk
-include src/bench/module.mk
-include src/prof/module.mk
TOOL_SRCS += $(wildcard tools/hpml/*.c)

LIB_OBJS := $(LIB_SRCS:%.c=$(O)/%.o)
TOOL_OBJS := $(TOOL_SRCS:%.c=$(O)/%.o)

LIBA := $(O)/lib/libhpml.a
LIBSO := $(O)/lib/libhpml.so.$(VERSION)
HPML := $(O)/bin/hpml
PROF_SO := $(O)/lib/libhpml-prof.so
PYFAST := $(if $(PYVER),$(if $(NPINC),$(if $(SANITIZE),,$(O)/python/hpml/_fast$(PYEXT))))

UNIT_SRCS := $(wildcard tests/unit/test_*.c)
UNIT_BINS := $(UNIT_SRCS:tests/unit/%.c=$(O)/tests/unit/%)
MPIT_SRCS := $(wildcard tests/mpi/test_*.c)
MPIT_BINS := $(MPIT_SRCS:tests/mpi/%.c=$(O)/tests/mpi/%)
HARNESS_OBJ := $(O)/tests/mpi/harness.o
# LD_PRELOAD shims of tests/cli/fail_alone.sh (malloc) and ml_errors.sh (rename), built
# without the sanitizers: the first replaces malloc, the second only wraps rename(); and
# tests/cli/python.sh's MPI communicators for the handle check (mpi_handles.c).
SHIMS := $(O)/tests/cli/fail_alloc.so $(O)/tests/cli/fail_rename.so $(O)/tests/cli/mpi_handles.so

# Keep test objects: they are not intermediates to delete after linking.
.SECONDARY:

.PHONY: all lib tests test test-san demo deps install install-python uninstall examples clean format format-check vec-report
all: lib $(HPML) tests

lib: $(LIBA) $(LIBSO) $(O)/hpml.pc $(PROF_SO) $(PYFAST)

$(O)/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

$(LIBA): $(LIB_OBJS)
	@mkdir -p $(@D)
	rm -f $@
	ar rcs $@ $^

$(LIBSO): $(LIB_OBJS)
	@mkdir -p $(@D)
	$(CC) -shared -Wl,-soname,libhpml.so.$(SOMAJOR) $(LDFLAGS) -o $@ $^ $(LDLIBS)
	ln -sf libhpml.so.$(VERSION) $(O)/lib/libhpml.so.$(SOMAJOR)
	ln -sf libhpml.so.$(SOMAJOR) $(O)/lib/libhpml.so

$(HPML): $(TOOL_OBJS) $(LIBA)
	@mkdir -p $(@D)
	$(CC) $(LDFLAGS) -o $@ $(TOOL_OBJS) $(LIBA) $(LDLIBS)

$(O)/python/hpml/_fast$(PYEXT): python/hpml/_fast.c
	@mkdir -p $(@D)
	$(PYCC) $(OPT) -g -fPIC -shared $(WARN) -isystem $(PYINC) -isystem $(NPINC) -o $@ $<

# Installed names carry the MPI, so that the Open MPI and MPICH builds can be installed
# side by side: libhpml-$(MPI).{a,so}, hpml-$(MPI).pc, bin/hpml-$(MPI). The default MPI's
# install also owns the plain names (hpml.pc, libhpml.{a,so}, bin/hpml) as symlinks.
DEFAULT_MPI := openmpi
FLAVOR := hpml-$(MPI)
MPI_PC_openmpi := ompi-c
MPI_PC_mpich := mpich
LIBSO_INST := $(O)/install/lib$(FLAVOR).so.$(VERSION)
PC_SED = sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@VERSION@|$(VERSION)|g' \
             -e 's|@MPI@|$(MPI)|g' -e 's|@MPI_PC@|$(MPI_PC_$(MPI))|g' \
             -e 's|@BLAS_LIBS@|$(BLAS_LIBS)|g' hpml.pc.in

# The commit the library is built from (hpml_build_commit; "-dirty" with uncommitted
# changes, "unknown" outside git), in a header rewritten only when it changes.
COMMIT := $(shell c=$$(git rev-parse --short=12 HEAD 2>/dev/null) && \
            { git diff --quiet HEAD -- 2>/dev/null || c=$$c-dirty; echo $$c; } || echo unknown)
$(O)/gen/hpml_commit.h: FORCE
	@mkdir -p $(@D)
	@echo '#define HPML_BUILD_COMMIT "$(COMMIT)"' | cmp -s - $@ || \
	    echo '#define HPML_BUILD_COMMIT "$(COMMIT)"' > $@
$(O)/src/core/version.o: $(O)/gen/hpml_commit.h
$(O)/src/core/version.o: CPPFLAGS += -I$(O)/gen
.PHONY: FORCE
FORCE:

$(O)/hpml.pc: hpml.pc.in Makefile
	@mkdir -p $(@D)
	$(PC_SED) > $@

# The installed shared library, linked again with its own soname.
$(LIBSO_INST): $(LIB_OBJS)
	@mkdir -p $(@D)
	$(CC) -shared -Wl,-soname,lib$(FLAVOR).so.$(SOMAJOR) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# examples/*.c, built against this build tree as a user would against an install:
# `cc prog.c $$(pkg-config --cflags --libs hpml)` (tests/cli/install.sh does that).
EXAMPLES := $(patsubst examples/%.c,$(O)/examples/%,$(wildcard examples/*.c))
examples: $(EXAMPLES)
$(O)/examples/%: examples/%.c $(LIBA)
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(CFLAGS) -o $@ $< $(LIBA) $(LDLIBS)

tests: $(UNIT_BINS) $(MPIT_BINS) $(SHIMS)

$(O)/tests/cli/%.so: tests/cli/%.c
	@mkdir -p $(@D)
	$(CC) $(OPT) -fPIC -shared $(WARN) -o $@ $< -ldl

$(O)/tests/unit/%: $(O)/tests/unit/%.o $(LIBA)
	$(CC) $(LDFLAGS) -o $@ $< $(LIBA) $(CMOCKA_LIBS) $(LDLIBS)

$(O)/tests/mpi/%: $(O)/tests/mpi/%.o $(HARNESS_OBJ) $(LIBA)
	$(CC) $(LDFLAGS) -o $@ $< $(HARNESS_OBJ) $(LIBA) $(LDLIBS)

# Everything the README's two commands need is installed by the script, never by hand.
deps:
	scripts/install-deps.sh

# `make test` builds and runs the whole suite on both MPIs; TESTS=pattern narrows it.
test: deps
	$(MAKE) -j$(NPROC) MPI=openmpi all
	$(MAKE) -j$(NPROC) MPI=mpich all
	$(MAKE) -j$(NPROC) MPI=openmpi SANITIZE=address,undefined tests
	tests/run.sh --mpi openmpi,mpich --san-subset openmpi $(if $(TESTS),--filter '$(TESTS)')

# The whole suite on sanitizer builds (slower; not part of `make test`).
test-san: deps
	$(MAKE) -j$(NPROC) MPI=openmpi SANITIZE=address,undefined all
	$(MAKE) -j$(NPROC) MPI=mpich SANITIZE=address,undefined all
	tests/run.sh --san --mpi openmpi,mpich $(if $(TESTS),--filter '$(TESTS)')

demo: deps
	$(MAKE) -j$(NPROC) MPI=$(MPI) all
	scripts/demo.sh $(MPI)

install: lib $(HPML) $(LIBSO_INST)
	install -d $(DESTDIR)$(PREFIX)/include/hpml $(DESTDIR)$(PREFIX)/lib/pkgconfig \
	           $(DESTDIR)$(PREFIX)/bin
	install -m 644 include/hpml/*.h $(DESTDIR)$(PREFIX)/include/hpml/
	install -m 644 $(LIBA) $(DESTDIR)$(PREFIX)/lib/lib$(FLAVOR).a
	install -m 755 $(LIBSO_INST) $(DESTDIR)$(PREFIX)/lib/
	ln -sf lib$(FLAVOR).so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/lib$(FLAVOR).so.$(SOMAJOR)
	ln -sf lib$(FLAVOR).so.$(SOMAJOR) $(DESTDIR)$(PREFIX)/lib/lib$(FLAVOR).so
	$(PC_SED) > $(DESTDIR)$(PREFIX)/lib/pkgconfig/$(FLAVOR).pc
	install -m 755 $(HPML) $(DESTDIR)$(PREFIX)/bin/$(FLAVOR)
	install -m 755 $(PROF_SO) $(DESTDIR)$(PREFIX)/lib/libhpml-prof-$(MPI).so
ifeq ($(MPI),$(DEFAULT_MPI))
	ln -sf lib$(FLAVOR).so $(DESTDIR)$(PREFIX)/lib/libhpml.so
	ln -sf lib$(FLAVOR).a $(DESTDIR)$(PREFIX)/lib/libhpml.a
	ln -sf $(FLAVOR).pc $(DESTDIR)$(PREFIX)/lib/pkgconfig/hpml.pc
	ln -sf $(FLAVOR) $(DESTDIR)$(PREFIX)/bin/hpml
	ln -sf libhpml-prof-$(MPI).so $(DESTDIR)$(PREFIX)/lib/libhpml-prof.so
endif
ifneq ($(PYVER),)
	$(INSTALL_PYTHON)
endif

# The Python package and its dist-info (with the distributed.comm.backends entry point)
# alone, from what is built: nothing is rebuilt (tests/cli/dask.sh installs it this way,
# so that a test never relinks the library under the rest of the suite).
define INSTALL_PYTHON
install -d $(DESTDIR)$(PYDIR)/hpml
install -m 644 python/hpml/*.py $(DESTDIR)$(PYDIR)/hpml/
$(if $(PYFAST),install -m 755 $(PYFAST) $(DESTDIR)$(PYDIR)/hpml/)
install -d $(DESTDIR)$(PYDIR)/hpml/torch
install -m 644 python/hpml/torch/*.py $(DESTDIR)$(PYDIR)/hpml/torch/
install -d $(DESTDIR)$(PYDIR)/hpml-$(VERSION).dist-info
printf 'Metadata-Version: 2.1\nName: hpml\nVersion: $(VERSION)\n' \
    >$(DESTDIR)$(PYDIR)/hpml-$(VERSION).dist-info/METADATA
printf '[distributed.comm.backends]\nmpi = hpml.dask_comm:MPIBackend\n' \
    >$(DESTDIR)$(PYDIR)/hpml-$(VERSION).dist-info/entry_points.txt
endef
install-python:
	@test -n "$(PYVER)" || { echo "make install-python: $(PYTHON) not found" >&2; exit 1; }
	@$(if $(PYFAST),test -e $(PYFAST) || \
	    { echo "make install-python: $(PYFAST) is not built (make MPI=$(MPI))" >&2; exit 1; })
	$(INSTALL_PYTHON)

# Removes this MPI's files (and the plain names with the default MPI's); the headers go
# with the last flavour.
uninstall:
	rm -f $(DESTDIR)$(PREFIX)/lib/lib$(FLAVOR).a $(DESTDIR)$(PREFIX)/lib/lib$(FLAVOR).so \
	      $(DESTDIR)$(PREFIX)/lib/lib$(FLAVOR).so.$(SOMAJOR) \
	      $(DESTDIR)$(PREFIX)/lib/lib$(FLAVOR).so.$(VERSION) \
	      $(DESTDIR)$(PREFIX)/lib/pkgconfig/$(FLAVOR).pc $(DESTDIR)$(PREFIX)/bin/$(FLAVOR) \
	      $(DESTDIR)$(PREFIX)/lib/libhpml-prof-$(MPI).so
ifeq ($(MPI),$(DEFAULT_MPI))
	rm -f $(DESTDIR)$(PREFIX)/lib/libhpml.so $(DESTDIR)$(PREFIX)/lib/libhpml.a \
	      $(DESTDIR)$(PREFIX)/lib/pkgconfig/hpml.pc $(DESTDIR)$(PREFIX)/bin/hpml \
	      $(DESTDIR)$(PREFIX)/lib/libhpml-prof.so
endif
	if ! ls $(DESTDIR)$(PREFIX)/lib/pkgconfig/hpml-*.pc >/dev/null 2>&1; then \
	    rm -rf $(DESTDIR)$(PREFIX)/include/hpml; \
	    $(if $(PYVER),rm -rf $(DESTDIR)$(PYDIR)/hpml $(DESTDIR)$(PYDIR)/hpml-$(VERSION).dist-info;) fi

FORMAT_SRCS = $(shell git ls-files '*.c' '*.h' 2>/dev/null)
format:
	clang-format -i $(FORMAT_SRCS)
format-check:
	@clang-format --dry-run --Werror $(FORMAT_SRCS) && echo "format-check: clean"

vec-report:
	$(CC) $(CPPFLAGS) $(CFLAGS) -fopt-info-vec-optimized -c src/core/reduce.c -o /dev/null 2>&1 \
	    | grep -E 'reduce\.c' | sort -u

clean:
	rm -rf build

-include tests/fuzz/fuzz.mk
-include src/prof/prof.mk
-include $(LIB_OBJS:.o=.d) $(TOOL_OBJS:.o=.d) $(UNIT_BINS:=.d) $(MPIT_BINS:=.d) $(HARNESS_OBJ:.o=.d)
