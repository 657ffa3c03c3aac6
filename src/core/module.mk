LIB_SRCS += $(wildcard src/core/*.c)
