"""The config doctor: parse what users paste (DeepSpeed JSON, accelerate / TrainingArguments / front-end YAML,
launch lines), the front ends' equivalents, and `kb lint` (the rule engine and the rules)."""
