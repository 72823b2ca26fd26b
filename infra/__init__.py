"""brokerbench on AWS: the Pulumi program of every stack (one per broker system), its
typed components, the cloud-init user-data of every node, the security validators, and the
agent the client machines run."""
