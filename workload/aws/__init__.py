"""What runs on the machines of an AWS stack, beside the local coordinator
(:mod:`workload.runner`): the client machines' agent (:mod:`.agent`), which sequences sweep
points through markers in the run's S3 prefix, drives the scenario's faults from the
coordinating client (:mod:`.fault_driver`) and uploads results; the fault agent of broker
machines (:mod:`.fault_agent`, standard library and boto3 only); and the S3 store they share
(:mod:`.store`). The Pulumi program that creates those machines is ``infra/``."""
