# libhpml-prof.so: the PMPI and I/O interposer loaded with LD_PRELOAD (docs/prof.md),
# separate from libhpml, linked against the MPI library and libc only. Included at the
# end of the Makefile (its rules must not become the default goal).
PROF_SO_SRCS := $(filter-out src/prof/report.c src/prof/trace_json.c,$(wildcard src/prof/*.c))
PROF_SO_OBJS := $(PROF_SO_SRCS:%.c=$(O)/prof-so/%.o)

# Without the sanitizers even in a sanitizer build: a preloaded library cannot bring the
# ASan runtime into a program that was built without it.
$(O)/prof-so/%.o: %.c
	@mkdir -p $(@D)
	$(CC) $(CPPFLAGS) $(OPT) -g -fPIC -pthread $(WARN) -c $< -o $@

$(PROF_SO): $(PROF_SO_OBJS)
	@mkdir -p $(@D)
	$(CC) -shared -pthread -o $@ $^ -ldl

-include $(PROF_SO_OBJS:.o=.d)

# The MPI program of tests/cli/prof.sh (known traffic, in-place allreduce, MPI_Abort, I/O).
PROF_TEST_PROG := $(O)/tests/cli/prof_prog
tests: $(PROF_TEST_PROG)
$(PROF_TEST_PROG): tests/cli/prof_prog.c
	@mkdir -p $(@D)
	$(CC) $(OPT) $(WARN) -o $@ $<
