LIB_SRCS += $(wildcard src/nn/*.c)
