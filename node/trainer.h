/* node/trainer: the centralized baseline: one process trains one model on the whole training
 * set with minibatch SGD and traces its evaluation.
 *
 * Reads the node config (docs/node-config.md), writes RUN_DIR/partition.csv (one node, all
 * samples) and RUN_DIR/eval.csv with columns
 *   t_s,node,updates,epoch,samples,test_accuracy,test_loss,train_loss
 * every eval.every seconds and once at the end. Stops at train.epochs, stop.time (seconds since
 * run.origin_ns), stop.steps (updates) or stop.accuracy (test accuracy at an evaluation),
 * whichever comes first. */
#ifndef STALENET_TRAINER_H
#define STALENET_TRAINER_H

/* The train_loss column: a fixed sample of this many training samples. */
#define TRAINER_LOSS_SAMPLE 10000
/* The stream (with run.seed) that shuffles the training set at the start of every epoch; the
 * simulator draws the same orders from it. */
#define TRAINER_RNG_STREAM_EPOCH 0x65706f6368ull

struct kv;

/* Train as configured. Returns 0 or negative errno (logged). */
int trainer_run(const struct kv *cfg);

#endif
