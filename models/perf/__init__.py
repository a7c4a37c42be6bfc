"""What the model costs: parameter and FLOP counts (`flops`), timed forward and training steps
(`benchmark`), and compiling a training step at full size on abstract devices
(`abstract_compile`)."""
