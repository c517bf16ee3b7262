"""TWOSOME's prompts for text Overcooked (``policy_pomdp.obs2text``): the prompt the agent reads and
the labels of the macro-actions, read from the symbolic observation (what the cook sees) alone.

The observation (``info["features"]`` of :class:`~groundrl.envs.overcooked.OvercookedEnv`) holds
each food's row, column and chop count, then the bowl's, the boards' and the delivery counter's
row and column, then the cook's, then the dish's one-hot code; zeros for what the cook does not see.
"""

from __future__ import annotations

import numpy as np

from groundrl.envs.base import join_words


def _sentence(text: str) -> str:
    # TWOSOME capitalizes each sentence with str.capitalize (the rest lower-cased)
    return text.capitalize()


def _notice(items: list[str]) -> list[str]:
    if not items:
        return []
    where = "on the table" if len(items) == 1 else "on the different tables"
    return [_sentence(f"You notice {join_words(items)} {where}.")]


def tomato_salad_text(obs: np.ndarray) -> tuple[str, list[str]]:
    """Tomato Salad's prompt and its 5 macro-actions' labels."""
    labels = ["pick up the tomato", "take the bowl", "walk to the cutting board", "serve nothing", "chop nothing"]
    tomato, bowl, agent = list(obs[0:2]), list(obs[3:5]), list(obs[9:11])
    chopped = obs[2] == 3
    tomato_words = "a chopped tomato" if chopped else "an unchopped tomato"
    sentences = ["There is a fixed cutting board in the room."]
    sentences += _notice([name for name, pos, start in (("a tomato", tomato, [0, 5]), ("a bowl", bowl, [6, 5]))
                          if pos == start])
    on_board = [name for name, pos in (("tomato", tomato), ("bowl", bowl)) if pos == [1, 0]]
    if on_board == ["bowl"]:
        sentences.append("A bowl is on the cutting board.")
    elif on_board == ["tomato"]:
        sentences.append(_sentence(f"{tomato_words} is on the cutting board."))
        if agent == [1, 1]:
            labels[4] = "chop the tomato"
    elif on_board:
        sentences.append(_sentence("a bowl containing a chopped tomato is on the cutting board."))
    in_hand = [name for name, pos in (("tomato", tomato), ("bowl", bowl)) if pos == agent]
    # (2, 1) faces a second board that Tomato Salad does not have; TWOSOME's text still says so
    at_board = agent in ([1, 1], [2, 1])
    front = "Currently you are standing in front of the cutting board"
    if in_hand:
        labels[3] = "serve the dish"
    if not in_hand:
        sentences.append(f"{front} without anything in hand." if agent == [1, 1]
                         else "Currently you don't have anything in hand.")
    elif in_hand == ["bowl"]:
        sentences.append(f"{front}, carrying a bowl in hand." if at_board
                         else "Currently you are carrying a bowl in hand.")
        labels[0], labels[2] = "put the tomato in the bowl", "put the bowl on the cutting board"
    elif in_hand == ["tomato"]:
        sentences.append(f"{front}, carrying {tomato_words} in hand." if at_board
                         else f"Currently you are carrying {tomato_words} in hand.")
        if not chopped:
            labels[2] = "put the tomato on the cutting board"
    else:
        sentences.append(f"{front}, carrying a bowl containing chopped tomato in hand." if at_board
                         else "Currently you are carrying a bowl containing chopped tomato.")
        labels[0], labels[2] = "put the tomato in the bowl", "put the bowl on the cutting board"
    sentences.append("To serve the dish of a bowl only containing chopped tomato, you should first")
    return " ".join(sentences), labels


def tomato_lettuce_salad_text(obs: np.ndarray) -> tuple[str, list[str]]:
    """Tomato-Lettuce Salad's prompt and its 8 macro-actions' labels."""
    labels = ["pick up the tomato", "pick up the lettuce", "pick up the onion", "take the empty bowl",
              "walk to the first cutting board", "walk to the second cutting board", "serve nothing", "chop nothing"]
    names = ("tomato", "lettuce", "onion", "bowl")
    articles = ("a tomato", "a lettuce", "an onion", "a bowl")
    starts = ([0, 5], [1, 6], [2, 6], [6, 5])
    positions = [list(obs[3 * i: 3 * i + 2]) for i in range(4)]
    chopped = [obs[3 * i + 2] == 3 for i in range(3)]
    agent = list(obs[17:19])
    places = {"hand": agent, "first": [1, 0], "second": [2, 0]}
    on = {place: [i for i in range(4) if positions[i] == cell] for place, cell in places.items()}
    if any(len(items) > 1 for items in on.values()):
        labels[3] = "take the bowl"

    def food_words(i: int) -> str:
        return f"a chopped {names[i]}" if chopped[i] else f"an unchopped {names[i]}"

    sentences = ["There are two fixed cutting boards in the room."]
    sentences += _notice([articles[i] for i in range(4) if positions[i] == starts[i]])
    for number, board in enumerate(("first", "second")):
        items = on[board]
        if len(items) == 1 and items[0] == 3:
            sentences.append(_sentence(f"a bowl is on the {board} cutting board."))
        elif len(items) == 1:
            sentences.append(_sentence(f"{food_words(items[0])} is on the {board} cutting board."))
            if agent == [number + 1, 1]:
                labels[7] = f"chop the {names[items[0]]}"
        elif items:
            contents = join_words([names[i] for i in items[:-1]])
            sentences.append(_sentence(f"a bowl containing chopped {contents} is on the {board} cutting board."))
    board = {(1, 1): "first", (2, 1): "second"}.get(tuple(agent))
    front = f"Currently you are standing in front of the {board} cutting board"
    held = on["hand"]
    if held:
        labels[6] = "serve the dish"
    if not held:
        sentences.append(f"{front} without anything in hand." if board
                         else "Currently you don't have anything in hand.")
    elif len(held) == 1:
        what = "a bowl" if held[0] == 3 else food_words(held[0])
        sentences.append(_sentence(f"{front}, carrying {what} in hand." if board
                                   else f"Currently you are carrying {what} in hand."))
        if held[0] == 3:
            labels[:3] = [f"put the {names[i]} in the bowl" for i in range(3)]
            labels[4:6] = ["put the bowl on the first cutting board", "put the bowl on the second cutting board"]
        elif not chopped[held[0]]:
            labels[4:6] = [f"put the {names[held[0]]} on the {b} cutting board" for b in ("first", "second")]
    else:
        contents = join_words([names[i] for i in held[:-1]])
        sentences.append(_sentence(f"{front}, carrying a bowl containing chopped {contents} in hand." if board
                                   else f"Currently you are carrying a bowl containing chopped {contents}."))
        labels[:3] = [f"put the {names[i]} in the bowl" for i in range(3)]
        labels[4:6] = ["put the bowl on the first cutting board", "put the bowl on the second cutting board"]
    sentences.append("To serve the dish of a bowl only containing chopped tomato and lettuce, you should first")
    return " ".join(sentences), labels
