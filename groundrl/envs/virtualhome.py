"""TWOSOME's VirtualHome tasks: Food Preparation, Entertainment, and the unseen Food Preparation
variants, on groundrl's household simulator (:mod:`groundrl.envs.household`).

Both tasks happen in one house (kitchen, bathroom, bedroom, living room). The prompts and valid
actions are TWOSOME's, word for word, typos included ("opend", "the them", a room sentence without
its period in Entertainment, a sentence said twice, "walk to the chips" offered where the milk was
meant): they are part of the benchmark. Food Preparation reads its states as TWOSOME's
``policy_v1.obs2text`` does, Entertainment as ``policy_v2.obs2text``.

>>> import gymnasium as gym, groundrl
>>> env = gym.make("groundrl/FoodPreparation-v0")
>>> obs, info = env.reset(seed=0)
>>> info["valid_actions"]
['walk to the living room', 'walk to the bathroom', 'walk to the bedroom', 'walk to the pancake', 'walk to the microwave']
>>> for action in ["walk to the pancake", "grab the pancake", "walk to the microwave", "open the microwave",
...                "put the pancake in the microwave", "close the microwave"]:
...     obs, reward, terminated, truncated, info = env.step(action)
>>> reward, terminated, info["success"]
(1.0, True, True)

The unseen tasks keep Food Preparation's dynamics and substitute words in what the agent reads:
Cheese, Hamburger, Apple Pie and Pizza replace the pancake; Washing Plate washes the dishes in the
dishwasher, Laundry the clothes in the washing machine.
"""  # noqa: E501 (doctest output)

from __future__ import annotations

from groundrl.envs.household import Features, HouseholdEnv, HouseholdTask, Scene, Thing
from groundrl.errors import InvalidArgumentError

HOUSE = Scene(
    rooms=("kitchen", "bathroom", "bedroom", "living room"),
    start_room="kitchen",
    things=(
        Thing("kitchen table", "kitchen"),
        Thing("kitchen counter", "kitchen"),
        Thing("pancake", "kitchen", on=("kitchen table",), grabbable=True),
        Thing("microwave", "kitchen", on=("kitchen counter",), openable=True, switchable=True),
        Thing("chips", "kitchen", on=("kitchen counter",), grabbable=True),
        Thing("milk", "kitchen", on=("kitchen table",), grabbable=True, openable=True),
        Thing("coffee table", "living room"),
        Thing("TV stand", "living room"),
        Thing("TV", "living room", on=("TV stand",), switchable=True),
        Thing("sofa", "living room", sittable=True, faces=("TV",)),
    ),
)

ROOM_WALKS = ("walk to the living room", "walk to the kitchen", "walk to the bathroom", "walk to the bedroom")
ROOMS = ("kitchen", "bathroom", "bedroom", "living room")
ROOM_FEATURES = ("in_kitchen", "in_bathroom", "in_bedroom", "in_livingroom")
_WALK_ORDER = ("living room", "kitchen", "bathroom", "bedroom")  # the order of ROOM_WALKS
INTRO = "There are four rooms: the kitchen, bathroom, bedroom, and living room. You are in the "


def _room(f: Features) -> str:
    (room,) = [room for room, feature in zip(ROOMS, ROOM_FEATURES) if f[feature]]
    return room


def _walks_elsewhere(room: str) -> list[int]:
    return [i for i, other in enumerate(_WALK_ORDER) if other != room]


# -- Food Preparation -----------------------------------------------------------------------------

FOOD_PREPARATION_ACTIONS = (
    *ROOM_WALKS,
    "walk to the pancake",               # 4
    "walk to the microwave",             # 5
    "grab the pancake",                  # 6
    "put the pancake in the microwave",  # 7
    "open the microwave",                # 8
    "close the microwave",               # 9
)
FOOD_PREPARATION_FEATURES = (
    *ROOM_FEATURES, "see_pancake", "close_to_pancake", "hold_pancake",
    "see_microwave", "close_to_microwave", "is_microwave_open", "pancake_in_microwave",
)


def describe_food_preparation(f: Features) -> tuple[str, list[int]]:
    room = _room(f)
    text = f"{INTRO}{room}. "
    actions = _walks_elsewhere(room)
    if room != "kitchen":
        hands = "you have grabbed the pancake in hand" if f["hold_pancake"] else "you are not grabbing anything in hand"
        return f"{text}and notice nothing useful. Currently, {hands}. {_HEAT_UP}", actions
    text += "You notice pancake and microwave. " if f["see_pancake"] else "The pancake is in the microwave. "
    if f["hold_pancake"]:
        text += "Currently, you have grabbed the pancake in hand. "
        if f["close_to_microwave"]:
            text, actions = text + "The microwave is close to you. ", actions + [4, 7, 8, 9]
        else:
            text, actions = text + "The microwave is not close to you. ", actions + [4, 5]
    else:
        nearby = {
            (1, 0): ("The pancake is close to you. ", [5, 6]),
            (0, 1): ("The microwave is close to you. ", [4, 8, 9]),
            (0, 0): ("The pancake and the microwave are not close to you. ", [4, 5]),
        }
        near = (f["close_to_pancake"], f["close_to_microwave"])
        if near in nearby:
            sentence, more = nearby[near]
            text += "Currently, you are not grabbing anything in hand. " + sentence
        else:  # close to both: the pancake is in the microwave, and nothing is said about hands
            more = [8, 9] if f["is_microwave_open"] else [9]
        actions += more
    if not f["see_pancake"]:
        text, actions = text + "The microwave is closed. ", actions[:3]
    else:
        text += "The microwave is opened. " if f["is_microwave_open"] else "The microwave is not opend. "
    return text + _HEAT_UP, actions


_HEAT_UP = "In order to heat up the pancake in the microwave, your next step is to"

FOOD_PREPARATION = HouseholdTask(
    name="FoodPreparation",
    scene=HOUSE,
    actions=FOOD_PREPARATION_ACTIONS,
    features=FOOD_PREPARATION_FEATURES,
    # in the kitchen and the pancake out of sight: inside the closed microwave
    goal=lambda f: bool(f["in_kitchen"] and not f["see_pancake"]),
    goal_text="heat up the pancake in the microwave",
    describe=describe_food_preparation,
)


# -- Entertainment --------------------------------------------------------------------------------

ENTERTAINMENT_ACTIONS = (
    *ROOM_WALKS,
    "walk to the chips",                  # 4
    "walk to the milk",                   # 5
    "walk to the coffee table",           # 6
    "walk to the TV",                     # 7
    "walk to the sofa",                   # 8
    "grab the chips",                     # 9
    "grab the milk",                      # 10
    "put the chips on the coffee table",  # 11
    "put the milk on the coffee table",   # 12
    "turn on the TV",                     # 13
    "turn off the TV",                    # 14
    "sit on the sofa",                    # 15
    "stand up from the sofa",             # 16
)
ENTERTAINMENT_FEATURES = (
    *ROOM_FEATURES,
    "see_chips", "close_to_chips", "hold_chips", "chips_on_coffeetable",
    "see_milk", "close_to_milk", "hold_milk", "milk_on_coffeetable",
    "see_tv", "close_to_tv", "is_face_tv", "is_tv_on",
    "see_sofa", "close_to_sofa", "is_sit_sofa",
    "see_coffeetable", "close_to_coffeetable",
)
_ENJOY = "In order to enjoy the chips and the milk while watching TV, your next step is to"
_HELD = {(1, 1): "the chips and the milk", (1, 0): "the chips", (0, 1): "the milk"}


def _hands(f: Features) -> str:
    held = _HELD.get((f["hold_chips"], f["hold_milk"]))
    return (f"Currently, you have grabbed {held} in hand. " if held
            else "Currently, you are not grabbing anything in hand. ")


def _snacks(f: Features, lead: str) -> str:
    """Where the snacks are, once the coffee table may hold one (empty when none is held)."""
    chips, milk = f["hold_chips"], f["hold_milk"]
    if chips and milk:
        return f"{lead}you have grabbed the chips and the milk in hand. "
    if milk:
        if f["chips_on_coffeetable"]:
            return f"{lead}you have the chips on the coffee table and the milk in your hand. "
        return f"{lead}you have grabbed the milk in hand. "
    if chips:  # TWOSOME says the first sentence twice when the milk is not on the table
        if f["milk_on_coffeetable"]:
            rest = f"{lead}you have the milk on the coffee table and the chips in your hand. "
        else:
            rest = f"{lead}you have grabbed the chips in hand. "
        return f"{lead}you have grabbed the chips in hand. " + rest
    return ""


def _entertainment_kitchen(f: Features) -> tuple[str, list[int]]:
    chips, milk = f["hold_chips"], f["hold_milk"]
    close_chips, close_milk = f["close_to_chips"], f["close_to_milk"]
    if f["see_chips"] and f["see_milk"]:
        text = "and notice chips and milk. "
        if chips and milk:
            return text + "Currently, you have grabbed the chips and the milk in hand. ", []
        if chips:
            near = ("The milk is close to you. But you have not grabbed the milk. ", [10]) if close_milk else (
                "The milk is not close to you. ", [5])
            return text + near[0] + "Currently, you have grabbed the chips in hand. ", near[1]
        if milk:
            near = ("The chips are close to you. But you have not grabbed the chips. ", [9]) if close_chips else (
                "The chips are not close to you. ", [4])
            return text + near[0] + "Currently, you have grabbed the milk in hand. ", near[1]
        sentence, actions = {
            (1, 1): ("They are close to you. But you have not grabbed the them. ", [9, 10]),
            (1, 0): ("The chips are close to you. But you have not grabbed the chips. ", [5, 9]),
            (0, 1): ("The milk is close to you. But you have not grabbed the milk. ", [4, 10]),
            (0, 0): ("But they are not close to you. ", [4, 5]),
        }[close_chips, close_milk]
        return text + sentence + "Currently, you are not grabbing anything in hand. ", actions
    if f["see_chips"]:  # the milk is on the coffee table; TWOSOME offers the walk to the milk
        if chips:
            return "and only notice chips. Currently, you have grabbed the chips in hand. ", []
        if close_chips:
            return "and only notice chips. The chips are close to you. But you have not grabbed the chips. ", [9]
        return "and only notice chips. The chips are not close to you. ", [5]
    if f["see_milk"]:  # the chips are on the coffee table; TWOSOME offers the walk to the chips
        if milk:
            return "and notice milk. Currently, you have grabbed the milk in hand. ", []
        if close_milk:
            return "and notice milk. The milk is close to you. But you have not grabbed the milk. ", [10]
        return "and notice milk. The milk is not close to you. ", [4]
    return "and notice nothing. ", []


def _entertainment_living_room(f: Features) -> tuple[str, list[int]]:
    text = "and you notice a coffee table, a TV and a sofa. "
    chips, milk = f["hold_chips"], f["hold_milk"]
    tv_lead = "Currently, the TV is turned on, " if f["is_tv_on"] else "Currently, "
    if f["close_to_coffeetable"]:
        one_down = (f["chips_on_coffeetable"] and milk) or (f["milk_on_coffeetable"] and chips)
        text += "The TV is not close to you. " if one_down else "The coffee table is close to you. "
        if chips and milk:
            actions = [7, 8, 11, 12]
        elif milk:
            actions = [7, 8] if f["chips_on_coffeetable"] else [7, 8, 12]
        elif chips:
            actions = [7, 8] if f["milk_on_coffeetable"] else [7, 8, 11]
        else:
            return text + "Currently, you are not grabbing anything in hand. ", []
        return text + _snacks(f, "Currently, "), actions
    if f["close_to_tv"]:
        if f["is_tv_on"]:
            return text + "The sofa is not close to you. " + _snacks(f, tv_lead), [6, 8]
        return text + "The TV is close to you. " + _snacks(f, tv_lead), [6, 8, 13, 14]
    if f["close_to_sofa"]:
        if f["is_sit_sofa"]:
            return text + "You are sitting on the sofa. " + _snacks(f, tv_lead), []
        return text + "The sofa is close to you. " + _snacks(f, tv_lead), [6, 7, 15, 16] if f["is_tv_on"] else [6, 7]
    return text + "They are not close to you. " + _hands(f), [6, 7, 8]


def describe_entertainment(f: Features) -> tuple[str, list[int]]:
    room = _room(f)
    if room == "kitchen":
        sentences, more = _entertainment_kitchen(f)
    elif room == "living room":
        sentences, more = _entertainment_living_room(f)
    else:
        sentences, more = "and notice nothing. " + _hands(f), []
    # (sic) no period after the room here, unlike Food Preparation
    return f"{INTRO}{room} {sentences}{_ENJOY}", _walks_elsewhere(room) + more


ENTERTAINMENT = HouseholdTask(
    name="Entertainment",
    scene=HOUSE,
    actions=ENTERTAINMENT_ACTIONS,
    features=ENTERTAINMENT_FEATURES,
    goal=lambda f: bool(
        f["in_livingroom"] and f["is_sit_sofa"] and f["is_face_tv"] and f["is_tv_on"]
        and (f["close_to_chips"] or f["chips_on_coffeetable"]) and (f["close_to_milk"] or f["milk_on_coffeetable"])
    ),
    goal_text="enjoy the chips and the milk while watching TV",
    describe=describe_entertainment,
)


# -- the unseen tasks -----------------------------------------------------------------------------

UNSEEN_WORDS = {
    "Cheese": {"pancake": "cheese"},
    "Hamburger": {"pancake": "hamburger"},
    "ApplePie": {"pancake": "apple pie"},
    "Pizza": {"pancake": "pizza"},
    "WashingPlate": {"heat up": "wash", "pancake": "dishes", "microwave": "dishwasher"},
    "Laundry": {"heat up": "wash", "pancake": "clothes", "microwave": "washing machine"},
}

TASKS: dict[str, HouseholdTask] = {
    "FoodPreparation": FOOD_PREPARATION,
    "Entertainment": ENTERTAINMENT,
    **{f"FoodPreparation-{name}": FOOD_PREPARATION.variant(f"FoodPreparation-{name}", words)
       for name, words in UNSEEN_WORDS.items()},
}


class VirtualHomeEnv(HouseholdEnv):
    """One of :data:`TASKS` by name, with TWOSOME's 50-step limit."""

    def __init__(self, task: str = "FoodPreparation", max_steps: int = 50, render_mode: str | None = None):
        if task not in TASKS:
            raise InvalidArgumentError(f"unknown VirtualHome task {task!r}; choose one of {', '.join(TASKS)}")
        super().__init__(TASKS[task], max_steps=max_steps, render_mode=render_mode)
        self.task_name = task

    # A task holds compiled predicates (closures), which pickle cannot store; checkpoints of a
    # training run pickle the environments mid-episode, so the task travels by name.
    def __getstate__(self):
        return {**self.__dict__, "task": self.task_name}

    def __setstate__(self, state):
        super().__setstate__({**state, "task": TASKS[state["task"]]})
