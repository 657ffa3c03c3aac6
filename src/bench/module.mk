LIB_SRCS += $(wildcard src/bench/*.c)
