"""A small household simulator: a scene graph, VirtualHome's executor rules, and text tasks on top.

TWOSOME's VirtualHome tasks run VirtualHome's pure-Python "evolving graph" executor on one house.
This package implements the rules of that executor that household tasks need, on a compact scene
graph, so that a task is a short declaration and not new engine code:

- a :class:`Scene`: rooms, and the things in them (what each rests on or is inside, whether it can
  be grabbed, opened, switched, sat on, and what it faces) (:mod:`~groundrl.envs.household.scene`);
- a :class:`World`: a scene's state as it changes, and the executor's rules
  (:mod:`~groundrl.envs.household.world`);
- a :class:`HouseholdTask`: the scene, the action strings (parsed: ``walk to the X``, ``grab the
  X``, ``put the X in the Y``, ``put the X on the Y``, ``open the X``, ``close the X``, ``turn on
  the X``, ``turn off the X``, ``sit on the X``, ``stand up from the X``), the boolean features the
  agent observes (named in a small language: ``in_kitchen``, ``see_pancake``, ``close_to_tv``,
  ``hold_milk``, ``is_microwave_open``, ``is_tv_on``, ``is_face_tv``, ``is_sit_sofa``,
  ``pancake_in_microwave``, ``chips_on_coffeetable``), a goal over those features, and how a state
  reads as a prompt with its valid actions (by default, a generic description; TWOSOME's tasks
  bring their own, see :mod:`groundrl.envs.virtualhome`) (:mod:`~groundrl.envs.household.task`);
- :class:`HouseholdEnv`, the gymnasium environment that runs a task
  (:mod:`~groundrl.envs.household.env`).

Adding a task
-------------
>>> from groundrl.envs.household import HouseholdEnv, HouseholdTask, Scene, Thing
>>> scene = Scene(
...     rooms=("kitchen", "hall"),
...     start_room="hall",
...     things=(
...         Thing("fridge", "kitchen", openable=True),
...         Thing("apple", "kitchen", on=("table",), grabbable=True),
...         Thing("table", "kitchen"),
...     ),
... )
>>> task = HouseholdTask(
...     name="StoreApple",
...     scene=scene,
...     actions=("walk to the kitchen", "walk to the hall", "walk to the apple", "walk to the fridge",
...              "grab the apple", "open the fridge", "close the fridge", "put the apple in the fridge"),
...     features=("in_kitchen", "see_apple", "hold_apple", "is_fridge_open", "apple_in_fridge"),
...     goal=lambda f: f["in_kitchen"] and f["apple_in_fridge"],
...     goal_text="put the apple in the fridge",
... )
>>> env = HouseholdEnv(task)
>>> obs, info = env.reset()
>>> obs
'There are two rooms: the kitchen and hall. You are in the hall. You notice nothing. You are not holding anything. In order to put the apple in the fridge, your next step is to'
>>> info["valid_actions"]
['walk to the kitchen']
>>> for action in ["walk to the kitchen", "walk to the apple", "grab the apple", "walk to the fridge",
...                "open the fridge", "put the apple in the fridge"]:
...     obs, reward, terminated, truncated, info = env.step(action)
>>> reward, terminated, info["success"]
(1.0, True, True)
"""  # noqa: E501 (doctest output)

from groundrl.envs.household.env import HouseholdEnv
from groundrl.envs.household.scene import Action, Scene, Thing, feature_key, parse_action
from groundrl.envs.household.task import (
    Description,
    FeatureFn,
    Features,
    HouseholdTask,
    compile_feature,
    describe_generically,
)
from groundrl.envs.household.world import World

__all__ = ["Action", "Description", "FeatureFn", "Features", "HouseholdEnv", "HouseholdTask", "Scene", "Thing",
           "World", "compile_feature", "describe_generically", "feature_key", "parse_action"]
