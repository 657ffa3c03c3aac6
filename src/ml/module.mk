LIB_SRCS += $(wildcard src/ml/*.c)
