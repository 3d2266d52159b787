"""Source to checked AST: Lark grammar, AST, semantic checks, type and shape inference."""
