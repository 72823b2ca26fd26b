"""brokerbench on AWS: the Pulumi program of every stack (one per broker system), its
typed components, the cloud-init user-data of every node and the security validators. What
runs on those machines is :mod:`workload.engine.aws`."""
