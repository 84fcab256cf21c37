"""A sandbox's life: files in and out, streamed commands, logs, stop, start, restart.

Run it against a daemon (``make run``) at $AGENT2ENV_URL, default
http://localhost:8080/api/v1.
"""

import tempfile
from pathlib import Path

from agent2env import Client, ConflictError


def main() -> None:
    with Client() as client, tempfile.TemporaryDirectory() as tmp:
        sandbox = client.sandbox.create_from_image("agent2env/python", memory="512Mi", ttl=600)
        sandbox = client.sandbox.wait_for_ready(sandbox.id, poll_interval=0.5, timeout=900)
        print(f"Sandbox {sandbox.id} is {sandbox.status} ({sandbox.cpu} CPU, {sandbox.memory})")

        # Files go in from bytes or from a local path, streamed.
        script = Path(tmp) / "count.py"
        script.write_text("import sys\nfor line in sys.stdin: print(len(line.split()))\n")
        client.sandbox.upload_path(sandbox.id, "bin/count.py", script, mode=0o755)
        info = client.sandbox.upload_file(
            sandbox.id, "data/words.txt", b"one two\nthree four five\n"
        )
        print(f"Uploaded {info.path} ({info.size} bytes, mode {info.mode})")

        # A command's output as it is produced.
        for event in client.sandbox.execute_stream(
            sandbox.id,
            [
                "sh",
                "-c",
                "python bin/count.py < data/words.txt > data/counts.txt; cat data/counts.txt",
            ],
        ):
            if event.type == "stdout":
                print(f"counted: {event.data}", end="")
            elif event.type == "exit":
                print(f"exit code {event.exit_code}")

        # Files come out whole, or streamed to a local file.
        counts = client.sandbox.download_file(sandbox.id, "data/counts.txt")
        print("counts.txt:", counts.decode().split())
        copy = Path(tmp) / "words.txt"
        size = client.sandbox.download_to(sandbox.id, "/workspace/data/words.txt", copy)
        print(f"Downloaded {size} bytes to {copy.name}")

        # Stop keeps the files; start brings the sandbox back.
        client.sandbox.stop(sandbox.id)
        print("After stop:", client.sandbox.get(sandbox.id).status)
        try:
            client.sandbox.execute(sandbox.id, ["true"])
        except ConflictError as e:
            print(f"A stopped sandbox runs nothing: {e.code}")
        client.sandbox.start(sandbox.id)
        client.sandbox.wait_for_ready(sandbox.id, poll_interval=0.5)
        client.sandbox.restart(sandbox.id)
        sandbox = client.sandbox.wait_for_ready(sandbox.id, poll_interval=0.5)
        kept = client.sandbox.execute(sandbox.id, ["cat", "data/counts.txt"])
        print("After restart the files are still there:", kept.stdout.split())

        for line in client.sandbox.get_logs(sandbox.id).events:
            print("event:", line)
        client.sandbox.delete(sandbox.id)


if __name__ == "__main__":
    main()
