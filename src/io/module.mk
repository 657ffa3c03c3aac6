LIB_SRCS += $(wildcard src/io/*.c)
