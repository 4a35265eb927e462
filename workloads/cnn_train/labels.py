"""The labels of a cnn_train record: what was run, as the process's own arguments say."""

WORKLOAD = "cnn_train"


def own_labels(args, always_mode=False):
    labels = {
        "workload": WORKLOAD,
        "framework": args.framework,
        "model": args.model,
        "batch_size": args.batch_size,
        "image_size": args.image_size,
        "data": args.data,
        "dtype": args.dtype,
        "threads": args.threads,
        "warmup_steps": args.warmup_steps,
        "steps": args.steps,
    }
    # `mode` joins the labels when it is not the default, so single-process records keep their
    # label set; --labels-json may still carry "mode": "single" (checked against the real mode).
    if always_mode or args.mode != "single":
        labels["mode"] = args.mode
    if args.mode != "single" and args.workers:
        labels["num_workers"] = args.workers  # replicas (ps) or ranks (distributed)
    return labels
