LIB_SRCS += $(wildcard src/nn/*.c)
# sqrtf without errno, so Adam's update loop vectorizes (sqrt is correctly rounded in
# either form: the same results).
$(O)/src/nn/optim.o: CFLAGS += -fno-math-errno
