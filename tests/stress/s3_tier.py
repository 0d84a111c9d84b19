"""The S3 durable tier of the campaign: moto_server behind the fault proxy (tests/integration).

The agents persist to s3://<bucket>/ckpt through FaultProxy; the oracle and the
corruption faults talk to moto directly (boto3), so they see the stored bytes.
With --network netns the proxy listens on the test machine's address on the
hosts' switch (netns.Hosts.own_ip), which the agents in their namespaces reach;
moto stays on loopback behind it.
"""
import sys
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))

from fault_proxy import Fault, FaultProxy  # noqa: E402
from s3_server import MotoServer, isolated_aws_env  # noqa: E402

PREFIX = "ckpt"
ACTIONS = ["slowdown", "internal", "delay", "drop_response", "reset_request", "reset_response"]


class S3Tier:
    actions = ACTIONS  # what an s3_faults round picks from
    def __init__(self, log_dir: Path, listen_host: str = "127.0.0.1"):
        self.moto = MotoServer(log_dir=log_dir).start()
        self.bucket = self.moto.create_bucket(f"stress-{uuid.uuid4().hex[:12]}")
        self.proxy = FaultProxy(self.moto.endpoint, listen_host=listen_host).start()
        self.client = self.moto.boto3_client()
        self.url = f"s3://{self.bucket}/{PREFIX}?endpoint={self.proxy.endpoint}"
        self.env = isolated_aws_env()
        self.env.update(self.moto.keys.env())

    def key(self, ns, step, name):
        return f"{PREFIX}/{ns}/step_{step:010d}/{name}"

    def get(self, ns, step, name):
        try:
            return self.client.get_object(Bucket=self.bucket, Key=self.key(ns, step, name))["Body"].read()
        except Exception:  # absent or unreadable: the caller treats it as no copy
            return None

    def put(self, ns, step, name, data: bytes):
        self.client.put_object(Bucket=self.bucket, Key=self.key(ns, step, name), Body=data)

    def names(self, ns, step):
        pre = f"{PREFIX}/{ns}/step_{step:010d}/"
        resp = self.client.list_objects_v2(Bucket=self.bucket, Prefix=pre)
        return sorted(o["Key"][len(pre):] for o in resp.get("Contents", []))

    def burst(self, action, count, delay_s=0.5):
        """The next `count` requests through the proxy get `action` (503 SlowDown, 500, a delay, a
        response cut in the middle, a connection reset in the request or the response)."""
        self.proxy.add(Fault(action, first=count, delay_s=delay_s))

    def calm(self):
        self.proxy.clear()

    def stop(self):
        self.proxy.stop()
        self.moto.stop()
