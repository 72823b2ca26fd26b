"""The EMR Serverless application that runs the analysis job of a run.

It starts on job submission (``brokerbench cloud analyze``) and stops itself one minute
after its last job (the least idle timeout EMR allows), so it costs nothing between runs.
EMR Serverless deletes only a STOPPED or CREATED application: ``brokerbench cloud down``
stops it and waits for STOPPED before ``pulumi destroy``. The job's execution role comes from :mod:`infra.access`.

The job needs Python ≥ 3.11 with pyarrow, pydantic and boto3, which EMR's own images do not
promise: by default it runs on the packed environment the stack uploads (:mod:`infra.pyenv`,
named in the job's ``spark.archives``), so the application has no image; a custom image
(``brokerbench:emrImage``) is the other way, and ``brokerbench cloud analyze`` refuses an
application with neither.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws


@dataclass(frozen=True)
class AnalysisAppArgs:
    release_label: str
    max_vcpu: int
    tags: dict[str, str]
    #: Minutes without a job before it stops itself (EMR allows 1 to 10080).
    idle_minutes: int = 1
    #: The custom image (ECR URI) the job runs on; None = EMR's own, which cannot run it.
    image_uri: str | None = None


class AnalysisApp(pulumi.ComponentResource):
    application_id: pulumi.Output[str]

    def __init__(
        self, name: str, args: AnalysisAppArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("brokerbench:infra:AnalysisApp", name, None, opts)
        application = aws.emrserverless.Application(
            name,
            release_label=args.release_label,
            type="spark",
            architecture="X86_64",
            auto_start_configuration=aws.emrserverless.ApplicationAutoStartConfigurationArgs(
                enabled=True
            ),
            auto_stop_configuration=aws.emrserverless.ApplicationAutoStopConfigurationArgs(
                enabled=True, idle_timeout_minutes=args.idle_minutes
            ),
            maximum_capacity=aws.emrserverless.ApplicationMaximumCapacityArgs(
                cpu=f"{args.max_vcpu} vCPU", memory=f"{args.max_vcpu * 4} GB"
            ),
            image_configuration=(
                aws.emrserverless.ApplicationImageConfigurationArgs(image_uri=args.image_uri)
                if args.image_uri
                else None
            ),
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.application_id = application.id
        self.register_outputs({"application_id": self.application_id})
