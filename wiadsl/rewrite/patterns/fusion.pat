// Built-in fusion patterns, applied by the `patterns` pass (before `fuse`).
// A rewrite to `fused_<name>` builds a fused op whose body is the matched
// elementwise ops; a leading conv2d/matmul becomes the fused op's product.
pattern ConvBiasRelu {
  match:   %c = conv2d(%x, %w); %b = add(%c, %bias); %o = relu(%b)
  rewrite: %o = fused_conv_bias_relu(%x, %w, %bias)
}

pattern MatmulBiasRelu {
  match:   %c = matmul(%a, %w); %b = add(%c, %bias); %o = relu(%b)
  rewrite: %o = fused_matmul_bias_relu(%a, %w, %bias)
}

pattern DoubleNegation {
  match:   %n = neg(%x); %o = neg(%n)
  rewrite: %o = %x
}
