# report.c, which reads the ranks' files of libhpml-prof.so and writes the reports
# (`hpml prof merge`), is libhpml's; the interposer itself is built by src/prof/prof.mk.
LIB_SRCS += src/prof/report.c src/prof/trace_json.c
