"""platbench.lab.workload_image's entry point ``wait``: site.yml starts the image build in the background (an
async task) and whatever uses the image includes ``wait`` first. It waits for the job, forgets it (the next user
goes straight on), and a failed build fails the wait with the build's own message. A command stands in for the
build here: the job is Ansible's either way."""

import sys

WAIT = {"ansible.builtin.include_role": {"name": "platbench.lab.workload_image", "tasks_from": "wait"}}


def plays(build_command, tmp_path):
    done = tmp_path / "built"
    return [
        {
            "name": "A build in the background, then two users of the image",
            "hosts": "localhost",
            "connection": "local",
            "gather_facts": False,
            "vars": {"ansible_python_interpreter": sys.executable},
            "tasks": [
                {
                    "name": "Start the stand-in build",
                    "ansible.builtin.command": {"argv": ["sh", "-c", build_command.format(done=done)]},
                    "async": 120,
                    "poll": 0,
                    "register": "workload_image_build_job",
                    "changed_when": True,
                },
                {"name": "The first user waits", **WAIT},
                {"name": "Look for its output", "ansible.builtin.stat": {"path": str(done)}, "register": "made"},
                {"name": "The second user", **WAIT},
                {"name": "Say what the first user found", "ansible.builtin.debug": {"msg": "{{ made.stat.exists }}"}},
            ],
        }
    ]


def test_the_first_user_waits_for_the_build_and_the_next_goes_straight_on(tmp_path, playbook):
    run = playbook(plays("sleep 3; touch {done}", tmp_path))
    assert run.rc == 0, run.output[-3000:]
    assert [result["msg"] for result in run.results("Say what the first user found")] == [True]
    # Polled until the job finished, once: the second user found no job left to wait for.
    waited = run.results("Wait for the image build")
    assert len(waited) == 1 and waited[0]["finished"] == 1
    assert run.output.count("TASK [platbench.lab.workload_image : Wait for the image build]") == 2
    skipped = [
        event
        for event in run.events
        if event.get("event") == "runner_on_skipped" and event["event_data"].get("task") == "Wait for the image build"
    ]
    assert len(skipped) == 1


def test_a_failed_build_fails_the_wait_with_its_message(tmp_path, playbook):
    run = playbook(plays("echo 'Step 7/9: pip install failed' >&2; exit 3", tmp_path))
    assert run.rc != 0
    failed = [
        event["event_data"]["res"]
        for event in run.events
        if event.get("event") == "runner_on_failed" and event["event_data"].get("task") == "Wait for the image build"
    ]
    assert failed and "Step 7/9: pip install failed" in failed[0].get("stderr", ""), run.output[-3000:]
    assert not run.results("Say what the first user found")
