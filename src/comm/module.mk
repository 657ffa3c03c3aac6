LIB_SRCS += $(wildcard src/comm/*.c)
