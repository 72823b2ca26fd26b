"""What runs on the machines of an AWS stack, beside the local fleet
(:mod:`workload.engine.local_fleet`): the client machines' agent (:mod:`.agent`), whose
coordinating client runs the coordinator (:mod:`workload.engine.coordinator`) over the client
machines through markers in the run's S3 prefix (:mod:`.fleet`), drives the scenario's
faults (:mod:`.fault_driver`) and uploads results; the fault agent of broker
machines (:mod:`.fault_agent`, standard library and boto3 only); and the S3 store they share
(:mod:`.store`). The Pulumi program that creates those machines is ``infra/``."""
