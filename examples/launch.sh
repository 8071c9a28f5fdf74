CUDA_VISIBLE_DEVICES=2,3 deepspeed --include localhost:2,3 --master_port 29501 train.py \
  --deepspeed ds_config.json --bf16 --gradient_checkpointing --per_device_train_batch_size 1
