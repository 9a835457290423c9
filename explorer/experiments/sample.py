"""The sample of texts a model reads that mean and resample ablation draw on (no streamlit).

For a model trained here on a toy task, the sample is the task's own inputs: TASK_TEXTS of them, drawn by the task's
generator from a fixed seed (its held-out split). For every English model (MiniLM, its untrained copy, the paper's
random Transformer, SmolLM2 and model folders) it is ENGLISH below: everyday prose of one to three sentences each
(kitchens, weather, travel, work, shops, letters, instructions, small explanations), written for this project and
copied from nowhere, so that a head's mean output is its average over text of the kind the model usually reads rather
than over three or four example sentences.
"""

from __future__ import annotations

from attention_explorer.explorer.run import corpus_input
from attention_explorer.models import tasks
from attention_explorer.models.registry import LoadedModel

TASK_TEXTS = 200  # inputs drawn from a toy task for its sample
SEED = 0  # the task generator's seed: the same sample on every run

ENGLISH = (
    "I left the window open last night, and by morning the kitchen smelled of rain and cut grass.",
    "The bus was ten minutes late again, so I walked the last part of the way to work.",
    "Please put the milk back in the fridge when you have finished with it.",
    "My grandmother keeps her buttons in an old biscuit tin with a picture of a lighthouse on the lid.",
    "We planted tomatoes along the south wall because that is where the sun stays longest.",
    "The meeting has been moved to Thursday afternoon. Bring the figures from last quarter if you can.",
    "He forgot his umbrella on the train and only noticed when the first drops began to fall.",
    "Turn left at the bakery, cross the small bridge, and the library is the red building on your right.",
    "The soup needs more salt, but the bread is perfect.",
    "She practised the piano every evening until the neighbours started asking for their favourite songs.",
    "Our cat sleeps on the warm lid of the washing machine whenever it is running.",
    "The shop on the corner closes early on Sundays, so buy the eggs today.",
    "A cold wind came down from the hills, and everyone on the platform pulled their collars up.",
    "If the printer jams again, open the side panel and gently pull out the crumpled sheet.",
    "The children built a fort out of sofa cushions and refused to come out for dinner.",
    "I have read the first chapter three times and I still do not know who the narrator is.",
    "The river rose quickly after the storm, and the footpath along the bank was closed for a week.",
    "Could you tell me whether this train stops at the airport?",
    "We ran out of coffee on Monday, which explains a great deal about Monday.",
    "The garden centre sells seeds by weight, so you can buy exactly as many as you need.",
    "My brother fixed the bicycle chain with a pair of pliers and a great deal of patience.",
    "The museum is free on the first Friday of every month, and the queue starts early.",
    "Water boils at a lower temperature on a high mountain because the air pressure there is lower.",
    "Leave the parcel with the neighbour at number twelve if nobody answers the door.",
    "The old clock in the hall gains about five minutes every week.",
    "After the concert we waited for almost an hour to get out of the car park.",
    "The recipe says to rest the dough for an hour, but twenty minutes is usually enough.",
    "A fox crossed the road in front of us, stopped to look at the headlights, and trotted into the hedge.",
    "The new manager asked everyone to write down one thing they would change about the office.",
    "It snowed so heavily that the school closed before lunch and the children went sledging instead.",
    "Remember to water the ferns on Tuesday; they dry out faster than the other plants.",
    "The hotel room was small but clean, and the window looked out over the harbour.",
    "When I was a child, I thought the moon followed our car on long journeys.",
    "The plumber said the leak came from a cracked pipe behind the bathroom wall.",
    "They painted the fence blue, although the neighbours had hoped for something quieter.",
    "Every spring the swallows come back to the same barn and rebuild their nests under the roof.",
    "The report is due at the end of the month, and the last section still needs a summary.",
    "She keeps a notebook by her bed in case she remembers something important during the night.",
    "The café around the corner makes the best cheese scones I have ever eaten.",
    "My phone battery dies by the middle of the afternoon, so I carry a charger everywhere.",
    "The farmer moved the sheep to the upper field because the lower one was flooded.",
    "Our team lost the first game, won the second, and spent the third arguing about the rules.",
    "Please sign both copies of the form and return one of them in the envelope provided.",
    "The lamp flickered twice and went out, leaving us to finish the story by candlelight.",
    "Bees visit the lavender all summer, and the whole path hums in the afternoon heat.",
    "He tried to learn the guitar from videos but found that his fingers would not stretch that far.",
    "A good map shows you not only where things are but also how far apart they are.",
    "The dentist told me to floss more often, which is what she tells everyone.",
    "The market sells fish in the morning and flowers in the afternoon.",
    "We missed the last ferry and spent the night in a small guesthouse by the pier.",
    "The kettle takes longer to boil when it is full, so only fill it with what you need.",
    "Her letter arrived two weeks late, with a foreign stamp and a coffee ring on the envelope.",
    "The library asks readers to return books within three weeks, but nobody minds a day or two.",
    "On clear nights you can see the lights of the next town across the bay.",
    "I ordered a blue jumper online, and a green one arrived with a note saying sorry.",
    "The road through the valley is narrow, so drivers have to take turns at the passing places.",
    "My aunt grows so many courgettes that she leaves bags of them on the neighbours' doorsteps.",
    "The lecture started with a question nobody could answer and ended with three more.",
    "Keep the receipt, because the shop will only exchange the shoes if you can show it.",
    "The dog barks at the postman every morning and then waits by the door for him the next day.",
    "A loaf of bread stays fresh longer in a cloth bag than in a plastic one.",
    "The train stopped in the middle of a field, and the driver announced a short delay.",
    "We spent the afternoon sorting old photographs and trying to guess who everyone was.",
    "The ice on the pond was too thin to stand on, so the ducks had it to themselves.",
    "Write your name at the top of every page in case the sheets get separated.",
    "The bakery opens at six, and by seven there is usually a queue out of the door.",
    "My neighbour plays the trumpet on Saturday mornings, whether anyone wants him to or not.",
    "The mechanic said the noise was only a loose heat shield and fixed it in ten minutes.",
    "The evening was so warm that we ate outside and stayed there until the stars came out.",
    "Reading on a moving bus makes some people feel sick, but it has never bothered me.",
    "The committee agreed to repair the village hall roof before the winter.",
    "A spoonful of honey in warm water helps a sore throat, or at least it feels as if it does.",
    "The path to the waterfall is steep in places, so wear good shoes.",
    "When the power came back on, every clock in the house was flashing midnight.",
    "She took the long way home so that she could walk past the sea.",
    "The supermarket has moved the rice again, and it took me ten minutes to find it.",
    "We counted forty-two kinds of birds on the island in a single weekend.",
    "The town hall clock struck twelve just as the wedding car pulled up outside.",
    "If you are cold, there is a spare blanket in the cupboard at the top of the stairs.",
    "The students were asked to explain why the sky looks blue in the day and red at sunset.",
    "A strong cup of tea and a quiet hour can fix most bad mornings.",
    "He wrote the shopping list on the back of an old envelope and then left it on the table.",
    "The swimming pool is closed for cleaning until the end of the week.",
    "The first apples of the year were small and sour, but the later ones were sweet.",
    "Our flight was cancelled, so we took the night train and arrived just in time for breakfast.",
    "The painter mixed three shades of grey before she found the colour of the winter sky.",
    "Most of the village turned out to help when the old oak tree fell across the road.",
    "I tried to assemble the bookcase without the instructions and ended up with two spare screws.",
    "The doctor's surgery is busiest on Monday mornings, so try to call in the afternoon.",
    "Clouds gathered over the hills all afternoon, but the rain never came.",
    "A small shop at the station sells newspapers, sandwiches and very strong coffee.",
    "The puppy chewed one shoe from every pair in the hall and left the other untouched.",
    "My sister is learning Spanish and labels everything in the kitchen with its Spanish name.",
    "The bridge is being repainted, so only one lane is open until the spring.",
    "You can tell how old a tree is by counting the rings inside its trunk.",
    "We bought a second-hand table and spent the weekend sanding off the old varnish.",
    "The teacher read the class a story about a lighthouse keeper who talked to the gulls.",
    "The cinema shows old films on Wednesday evenings, and the tickets are half price.",
    "Put the heavy books at the bottom of the box, or the bottom will give way.",
    "The wind blew the washing off the line and into the neighbour's vegetable patch.",
    "He always arrives at parties exactly on time and then has to wait for everyone else.",
    "The orchestra tuned their instruments while the audience found their seats.",
    "Fresh snow squeaks under your boots when the air is very cold.",
    "The gardener said that roses like a lot of sun and not too much water.",
    "My old car has no radio, so I sing on long drives, badly.",
    "The council has promised new street lights on our road before the end of the year.",
    "A heron stood perfectly still at the edge of the canal, waiting for a fish.",
    "We had to shout to be heard over the rain drumming on the tin roof.",
    "The price of the tickets includes a guided tour of the castle and a cup of tea.",
    "She found a ten pound note in the pocket of a coat she had not worn since last winter.",
    "The footballers trained in the rain and then complained about the mud in the changing room.",
    "If the soup is too thick, add a little water and stir it over a low heat.",
    "Our street holds a party every summer, with tables down the middle of the road.",
    "The nurse checked his temperature, wrote something on the chart, and smiled.",
    "Sound travels faster through water than through air, which is why whales can hear each other so far away.",
    "The little boat rocked gently at its mooring while the tide came in.",
    "I keep meaning to clear out the garage, but there is always something better to do on a Saturday.",
    "The lights in the office turn off by themselves at eight, even if someone is still working.",
    "Last summer we walked the whole coast path, one weekend at a time. It took us until October. "
    "My boots did not survive, but the blisters healed, and we are already planning the next one.",
    "The shop had sold out of bread by noon. The baker apologised and promised to bake twice as much the "
    "next day, and she did, and it sold out again.",
    "Dear Sam, thank you for the book you sent for my birthday. I started it on the train and missed my stop. "
    "I hope you are well and that the new flat is warmer than the old one.",
    "To make the sauce, melt the butter, stir in the flour, and add the milk a little at a time. Keep stirring "
    "so that it does not turn lumpy.",
    "The storm knocked out the power for most of the evening. We played cards by torchlight, and my father "
    "won every game, which he still mentions.",
    "Plants need light to turn water and air into sugar. That is why a pot left in a dark corner slowly turns "
    "yellow and leans towards the window.",
)


def texts(loaded: LoadedModel) -> tuple[str, ...]:
    """The texts this model's sample holds: its toy task's inputs, or ENGLISH."""
    if loaded.task is None:
        return ENGLISH
    return tuple(" ".join(pair.source) for pair in tasks.pairs(loaded.task, TASK_TEXTS, SEED))


def name(loaded: LoadedModel) -> str:
    """What the sample is, as a sentence's words: "200 inputs of the toy induction task, drawn with seed 0" or "124
    everyday English texts written for this explorer"."""
    if loaded.task is None:
        return f"{len(ENGLISH)} everyday English texts written for this explorer"
    return f"{TASK_TEXTS} inputs of the toy {loaded.task.name} task, drawn with seed {SEED}"


def corpus(loaded: LoadedModel) -> corpus_input.Corpus:
    """The sample as a corpus (the Corpus page's, `python -m explorer corpus --sample`'s and `ae.corpus(m, "sample")`'s
    texts), named by what it is."""
    return corpus_input.from_texts(texts(loaded), name(loaded))
