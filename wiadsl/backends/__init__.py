"""Code generators that turn optimized IR into something a machine runs."""
